"""Command-line options, ini settings and the marker: bad values are usage errors that name the
value, the accepted forms and the fix."""

from __future__ import annotations

import pytest

BENCH = """
def test_bench(cnnperf):
    pass
"""


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "CNN training performance (pytest-cnnperf):",
            "*--cnnperf *Run the benchmark tests (without it they are skipped and",
            "*--cudnn=MODE*",
            "*Parametrize benchmarks over cuDNN modes: on, off,",
            "*--cnnperf-device=DEVICE",
        ]
    )
    for option in (
        "--cnnperf-save",
        "--cnnperf-prune",
        "--cnnperf-baselines=DIR",
        "--cnnperf-machine=NAME",
        "--cnnperf-threshold=PCT",
        "--cnnperf-memory-threshold=PCT",
        "--cnnperf-strict",
        "--cnnperf-effort=LEVEL",
        "--cnnperf-inprocess",
        "--cnnperf-json=PATH",
        "--cnnperf-markdown=PATH",
        "--cnnperf-plot=PATH",
        "--cnnperf-benchmark-json=PATH",
        "--cnnperf-zoo-models=NAMES",
        "--cnnperf-zoo-batch-size=N*",
        "--cnnperf-zoo-image-size=PX",
        "--cnnperf-zoo-amp=MODE*",
        "--cnnperf-zoo-memory-format=FORMAT*",
    ):
        result.stdout.fnmatch_lines([f"  {option}*"])
    for ini in (
        "cnnperf_cudnn",
        "cnnperf_device",
        "cnnperf_baselines",
        "cnnperf_machine",
        "cnnperf_threshold",
        "cnnperf_memory_threshold",
        "cnnperf_strict",
        "cnnperf_effort",
        "cnnperf_inprocess",
        "cnnperf_samples",
        "cnnperf_min_time",
    ):
        result.stdout.fnmatch_lines([f"  {ini} (string):*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--cudnn=fast"],
            "*argument --cudnn: unknown cuDNN mode 'fast' in 'fast'; use one or more of on, off, "
            "benchmark, deterministic, separated by commas (e.g. --cudnn=on,benchmark)",
        ),
        (
            ["--cnnperf-device=gpu"],
            "*argument --cnnperf-device: 'gpu' is not a device; use auto, cpu, cuda or cuda:N with "
            "N a device index (e.g. --cnnperf-device=cuda:1)",
        ),
        (
            ["--cnnperf-threshold=ten"],
            "*argument --cnnperf-threshold: 'ten' is not a threshold; use a percentage such as 10% "
            "or 2.5%, or a fraction such as 0.1",
        ),
        (
            ["--cnnperf-memory-threshold=-5%"],
            "*argument --cnnperf-memory-threshold: '-5%' is not a threshold*",
        ),
        (
            ["--cnnperf-threshold=150%"],
            "*argument --cnnperf-threshold: '150%' cannot fail anything: a throughput loss is "
            "always below 100%; use a percentage below 100% such as 10%",
        ),
        (
            ["--cnnperf-threshold=100%"],
            "*argument --cnnperf-threshold: '100%' cannot fail anything*",
        ),
        (
            ["--cnnperf-threshold=15"],
            "*argument --cnnperf-threshold: '15' as a fraction is 1500%; did you mean 15%? Write a "
            "percentage such as 15%, or a fraction below 1 such as 0.1",
        ),
        (
            ["--cnnperf-samples=2,3"],
            "*argument --cnnperf-samples: '2,3' is not a number of samples; use a positive whole number such as 12",
        ),
        (
            ["--cnnperf-effort=max"],
            "*argument --cnnperf-effort: 'max' is not an effort level; use one of quick, standard, "
            "thorough",
        ),
        (
            ["--cnnperf-zoo-amp=fp8"],
            "*argument --cnnperf-zoo-amp: 'fp8' is not an AMP mode; use off, fp16 or bf16",
        ),
        (
            ["--cnnperf-zoo-memory-format=nhwc"],
            "*'nhwc' is not a memory format; use contiguous, channels_last or both*",
        ),
        (
            ["--cnnperf-zoo-batch-size=0"],
            "*'0' is not a list of positive integers; use e.g. 32 or 32,64",
        ),
    ],
)
def test_bad_option_values_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(BENCH)
    result = pytester.runpytest("--cnnperf", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        (
            "cnnperf_threshold = lots",
            "ERROR: ini setting cnnperf_threshold = 'lots': 'lots' is not a threshold*",
        ),
        (
            "cnnperf_device = tpu",
            "ERROR: ini setting cnnperf_device = 'tpu': 'tpu' is not a device*",
        ),
        (
            "cnnperf_strict = maybe",
            "ERROR: ini setting cnnperf_strict = 'maybe': 'maybe' is not a boolean; use true or false",
        ),
        (
            "cnnperf_cudnn = on,turbo",
            "ERROR: ini setting cnnperf_cudnn = 'on,turbo': unknown cuDNN mode 'turbo'*",
        ),
        (
            "cnnperf_samples = none",
            "ERROR: ini setting cnnperf_samples = 'none': 'none' is not a number of samples; use a positive whole number such as 12",
        ),
        (
            "cnnperf_samples = 2,3",
            "ERROR: ini setting cnnperf_samples = '2,3': '2,3' is not a number of samples; use a positive whole number such as 12",
        ),
        (
            "cnnperf_samples = 1000000",
            "ERROR: ini setting cnnperf_samples = '1000000': 1000000 samples is more than the 100 a benchmark may take: each is a fresh process of a second or more; use 100 or fewer",
        ),
        (
            "cnnperf_threshold = 5",
            "ERROR: ini setting cnnperf_threshold = '5': '5' as a fraction is 500%; did you mean 5%? Write a percentage such as 5%, or a fraction below 1 such as 0.1",
        ),
        (
            "cnnperf_memory_threshold = 1",
            "ERROR: ini setting cnnperf_memory_threshold = '1': '1' as a fraction is 100%; did you mean 1%? *",
        ),
        (
            "cnnperf_sample_timeout = 0",
            "ERROR: ini setting cnnperf_sample_timeout = '0': '0' is not a duration*",
        ),
        (
            "cnnperf_min_time = -1",
            "ERROR: ini setting cnnperf_min_time = '-1': '-1' is not a duration; use seconds such as 0.5",
        ),
    ],
)
def test_bad_ini_values_are_usage_errors(pytester: pytest.Pytester, ini: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(BENCH)
    result = pytester.runpytest("--cnnperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_ini_values_do_not_matter_without_cnnperf(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ncnnperf_threshold = lots\n")
    pytester.makepyfile(BENCH)
    pytester.runpytest().assert_outcomes(skipped=1)


def test_cuda_device_without_cuda_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On any machine: the run sees no CUDA device (as one without a GPU or driver)."""
    from pytest_cnnperf.measuring import device

    monkeypatch.setattr(device, "cuda_device_count", lambda: 0)
    pytester.makepyfile(BENCH)
    result = pytester.runpytest("--cnnperf", "--cnnperf-device=cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --cnnperf-device=cuda asks for a CUDA device, but none is usable here (torch * "
            "sees no CUDA device). Benchmark on the CPU with --cnnperf-device=cpu (or auto), or "
            "check the GPU and driver with nvidia-smi."
        ]
    )


def test_cudnn_modes_on_the_cpu_are_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BENCH)
    result = pytester.runpytest("--cnnperf", "--cnnperf-device=cpu", "--cudnn=on,benchmark")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --cudnn=on,benchmark asks for cuDNN modes, but this run measures on the CPU "
            "(--cnnperf-device=cpu), where cuDNN is not used. Drop --cudnn (and the cnnperf_cudnn "
            "ini setting) for CPU runs, or run on a GPU with --cnnperf-device=cuda."
        ]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("threshold='lots'", "*@pytest.mark.cnnperf(threshold='lots'): 'lots' is not a threshold*"),
        (
            "speed=1",
            "*@pytest.mark.cnnperf got unknown argument(s) speed; accepted: threshold, memory_threshold, metric, instructions_threshold, compile_time_threshold, effort, strict, attribution, structure, allowed_syncs",
        ),
        ("effort='max'", "*@pytest.mark.cnnperf(effort='max'): 'max' is not an effort level*"),
        (
            "threshold=5",
            "*@pytest.mark.cnnperf(threshold=5): 5 as a fraction is 500%; did you mean 5%? Write a percentage such as 5%, or a fraction below 1 such as 0.1",
        ),
        (
            "threshold='120%'",
            "*@pytest.mark.cnnperf(threshold='120%'): '120%' cannot fail anything*",
        ),
        ("threshold=True", "*@pytest.mark.cnnperf(threshold=True): True is not a threshold*"),
    ],
)
def test_bad_marker_arguments_are_errors_of_the_test(
    project: pytest.Pytester, marker: str, message: str
) -> None:
    project.makepyfile(
        f"""
        import pytest

        @pytest.mark.cnnperf({marker})
        def test_bench(cnnperf):
            pass
        """
    )
    result = project.runpytest("--cnnperf")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    result.stdout.no_fnmatch_line("*During handling*")


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cnnperf(threshold="20%")
        def test_plain():
            pass
        """
    )
    pytester.runpytest("--strict-markers").assert_outcomes(skipped=1)
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.cnnperf(threshold=None, memory_threshold=None*"])


def test_thresholds_that_would_switch_the_gate_off_are_refused() -> None:
    """A throughput loss cannot reach 100%, so a threshold at or above it passes everything; a
    bare number of 1 or more was probably meant as a percentage. Memory can grow by more than
    100%, so a growth threshold above it is legal when written as a percentage."""
    from pytest_cnnperf.settings import MEMORY_THRESHOLD, THRESHOLD

    assert THRESHOLD.parse("10%") == pytest.approx(0.10)
    assert THRESHOLD.parse(0.15) == pytest.approx(0.15)
    assert THRESHOLD.parse("99.5%") == pytest.approx(0.995)
    for bad in ("100%", "150%", "5", 5, "1", "1.0", 2.5, "0%", "-5%", "inf%", "nan", True):
        with pytest.raises(ValueError):
            THRESHOLD.parse(bad)
    assert MEMORY_THRESHOLD.parse("150%") == pytest.approx(1.5)
    assert MEMORY_THRESHOLD.parse("5%") == pytest.approx(0.05)
    with pytest.raises(ValueError, match="did you mean 5%"):
        MEMORY_THRESHOLD.parse("5")


def test_the_other_processes_get_the_ini_settings_and_the_zoos_options_as_given() -> None:
    """The revision's process and the counting one collect the tests again: the zoo's options
    decide which benchmarks there are, so they reach them as the command line gave them; the
    ini settings as this process reads them, with no revision to gate against."""
    from types import SimpleNamespace

    from pytest_cnnperf import plugin, zoo
    from pytest_cnnperf.settings import as_given

    args = (
        "--cnnperf",
        "--cnnperf-save",
        "--cnnperf-json=r.json",
        "--cnnperf-zoo-batch-size",
        "1,2",
        "--cnnperf-zoo-models=resnet18",
        "--pyargs",
        "pytest_cnnperf.zoo",
    )
    given = ["--cnnperf-zoo-batch-size=1,2", "--cnnperf-zoo-models=resnet18"]
    assert as_given(args, zoo.SETTINGS) == given
    ini = {"cnnperf_samples": "5", "cnnperf_against": "main"}
    config = SimpleNamespace(
        getini=lambda name: ini.get(name, ""), invocation_params=SimpleNamespace(args=args)
    )
    passed = plugin._passed_on(config)  # type: ignore[arg-type]
    assert passed[-2:] == tuple(given)
    assert "cnnperf_samples=5" in passed
    assert "cnnperf_against=" in passed  # the other sides gate against nothing
    assert not any(word.startswith(("--cnnperf-save", "--cnnperf-json")) for word in passed)
