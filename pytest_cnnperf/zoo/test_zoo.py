"""Train steps of the zoo's models (see ``pytest_cnnperf.zoo``)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_cnnperf.models import ModelFactory
from pytest_cnnperf.plugin import SESSION
from pytest_cnnperf.runner import CnnPerf
from pytest_cnnperf.zoo import ZooCase, ZooOptions, cases, refusal


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "zoo_case" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(SESSION, None)
    options = ZooOptions.of(session.settings) if session else ZooOptions()
    on_gpu = session is not None and session.device_type == "cuda"
    zoo = cases(options, on_gpu)
    several = len(options.batch_sizes or ()) > 1
    metafunc.parametrize("zoo_case", zoo, ids=[case.id(several) for case in zoo])


def test_train(cnnperf: CnnPerf, model_factory: ModelFactory, zoo_case: ZooCase) -> Any:
    """One training step: forward, cross-entropy, backward, SGD with momentum; eager, or
    compiled in a ``torch.compile`` mode (``--cnnperf-zoo-compile``)."""
    why = refusal(zoo_case)
    if why is not None:
        pytest.fail(f"cnnperf: {why}", pytrace=False)
    model = model_factory(zoo_case.model)
    cnnperf.train_step(
        model,
        batch_size=zoo_case.batch_size,
        image_size=zoo_case.image_size,
        amp=zoo_case.amp,
        channels_last=zoo_case.channels_last,
        compile=zoo_case.compile,
    )
