"""What a loader yields, read as ``train_loop`` reads it: pairs, other batches through
``unpack=``, what a loader says of itself unread, and the message for a batch it cannot read,
which names the fix from the batch's own keys."""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

#: what train_loop reads, as messages say it
PAIRS = (
    "train_loop reads (images, targets) pairs: a Dataset whose __getitem__ returns "
    "(image, label), batched by the DataLoader's default collate, or any iterable that yields "
    "(images, targets)"
)
#: what unpack= reads a batch that is not a pair with
UNPACK_FORMS = (
    "a pair of keys (the images' and the targets' in a mapping batch) or a callable that takes "
    "the batch and returns (images, targets)"
)
#: a batch's keys that plainly hold its images, and its targets (lower case)
IMAGE_KEYS = ("image", "images", "img", "imgs", "input", "inputs", "pixel_values", "x")
TARGET_KEYS = ("label", "labels", "target", "targets", "y", "class", "cls", "mask", "masks")

#: ``unpack=``: the keys of a mapping batch's images and targets, or batch -> (images, targets)
Unpacker = tuple[Hashable, Hashable] | Callable[[Any], Any]


def is_dataloader(loader: object) -> bool:
    """Whether ``loader`` is a torch DataLoader, or works like one (a dataset and workers)."""
    return hasattr(loader, "dataset") and hasattr(loader, "num_workers")


def loader_name(loader: Any) -> str:
    """How messages name a loader: ``the DataLoader of SleepyData``, ``the generator``."""
    if is_dataloader(loader):
        dataset = type(loader.dataset).__name__
        return f"the {type(loader).__name__} of {dataset}"
    return f"the {type(loader).__name__}"


def described(value: object) -> str:
    """A value as messages show it: ``a dict with keys 'image', 'label'``, ``a tuple of 3
    values``, ``a Tensor of shape (8, 3, 32, 32)``."""
    if isinstance(value, dict):
        return "a dict with keys " + ", ".join(repr(k) for k in list(value)[:5])
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} value{'' if len(value) == 1 else 's'}"
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"a {type(value).__name__} of shape {tuple(shape)}"
    return f"{type(value).__name__} {reprlib.repr(value)}"


def _code(key: Hashable) -> str:
    """A key as the user writes it in code: ``"image"``, ``0``."""
    if isinstance(key, str) and '"' not in key and "\\" not in key and key.isprintable():
        return f'"{key}"'
    return repr(key)


def _keys(batch: Mapping[Any, Any]) -> str:
    keys = list(batch)
    shown = ", ".join(repr(k) for k in keys[:10])
    return shown + (", ..." if len(keys) > 10 else "")


def plain_keys(batch: Mapping[Any, Any]) -> tuple[Hashable, Hashable] | None:
    """The keys of a mapping batch's images and targets, where they are plain: one key named
    as images are (``image``, ``img``, ...) and one as targets are (``label``, ``target``,
    ...), else one value a batch of images (4 dimensions) and one other of as many items."""

    def named(names: tuple[str, ...]) -> list[Hashable]:
        return [k for k in batch if isinstance(k, str) and k.lower() in names]

    images, targets = named(IMAGE_KEYS), named(TARGET_KEYS)
    if len(images) == 1 and len(targets) == 1:
        return images[0], targets[0]
    shapes = {k: tuple(s) for k, v in batch.items() if (s := getattr(v, "shape", None)) is not None}
    images = [k for k, shape in shapes.items() if len(shape) == 4]
    if len(images) != 1:
        return None
    count = shapes[images[0]][0]
    targets = [k for k, shape in shapes.items() if k != images[0] and shape[:1] == (count,)]
    return (images[0], targets[0]) if len(targets) == 1 else None


def _unpack_fix(batch: Mapping[Any, Any]) -> str:
    """``unpack=("image", "label")`` from a batch's own keys, or the form with its keys."""
    keys = plain_keys(batch)
    if keys is not None:
        return f"unpack=({_code(keys[0])}, {_code(keys[1])})"
    return f"unpack=(the images' key, the targets' key), two of {_keys(batch)}"


def _such(batch: object, before: str = "") -> str:
    """``, such as (batch["image"], batch["label"])`` (``before`` it: what takes the pair),
    where the keys of ``batch`` make it plain."""
    keys = plain_keys(batch) if isinstance(batch, Mapping) else None
    if keys is None:
        return ""
    return f", such as {before}(batch[{_code(keys[0])}], batch[{_code(keys[1])}])"


def unpack_text(unpack: object) -> str:
    """``unpack=`` as messages show it: ``("image", "label")``, ``to_pair``, ``<lambda>``."""
    if isinstance(unpack, (tuple, list)) and len(unpack) == 2:
        return f"({_code(unpack[0])}, {_code(unpack[1])})"
    if callable(unpack):
        name = getattr(unpack, "__name__", None)
        return name if isinstance(name, str) else f"a {type(unpack).__name__}"
    return reprlib.repr(unpack)


def unpack_problem(unpack: object) -> str | None:
    """What is wrong with ``unpack=`` as given (``None``: nothing)."""
    if unpack is None or callable(unpack):
        return None
    keys = list(unpack) if isinstance(unpack, (tuple, list)) else []
    if len(keys) == 2 and all(isinstance(k, Hashable) for k in keys):
        if keys[0] != keys[1]:
            return None
        return (
            f"unpack={unpack_text(unpack)} names the key {_code(keys[0])} twice; give the key "
            'of the images first and that of the targets second, such as unpack=("image", '
            '"label")'
        )
    return (
        f"unpack={reprlib.repr(unpack)} is neither a pair of keys nor a callable; train_loop "
        f"reads a batch that is not an (images, targets) pair through unpack=: {UNPACK_FORMS}; "
        'use unpack=("image", "label") with the keys of your batches, or leave unpack out for a '
        "loader that yields (images, targets) pairs"
    )


def as_unpacker(unpack: object) -> Unpacker | None:
    """``unpack=`` as the loop reads it, once :func:`unpack_problem` found nothing wrong: a
    list of two keys as a tuple."""
    if isinstance(unpack, list):
        return (unpack[0], unpack[1])
    return unpack  # type: ignore[return-value]


def _pair_fix(loader: object) -> str:
    """How a loader of this kind is made to yield (images, targets) pairs."""
    if is_dataloader(loader):
        return (
            "return (image, label) from the dataset's __getitem__, or give the DataLoader a "
            "collate_fn that returns (images, targets)"
        )
    if isinstance(loader, Sequence):
        return f"make each batch of the {type(loader).__name__} an (images, targets) pair"
    return "yield (images, targets) from it"


def unpacked(loader: object, batch: object, unpack: Unpacker | None) -> Any:
    """The ``(images, targets)`` pair of a batch ``loader`` yielded, read through ``unpack``;
    a batch that gives none raises ``TypeError`` or ``ValueError`` with the fix."""
    if unpack is None:
        if type(batch) in (tuple, list) and len(batch) == 2:  # type: ignore[arg-type]
            return batch
        raise TypeError(_not_a_pair(loader, batch))
    if callable(unpack):
        try:
            pair = unpack(batch)
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ValueError(
                f"unpack={unpack_text(unpack)} raised {said} on {described(batch)} from "
                f"{loader_name(loader)}; unpack takes the loader's batch and returns (images, "
                f"targets): make it read this batch{_such(batch, 'unpack=lambda batch: ')}"
            ) from exc
        if type(pair) in (tuple, list) and len(pair) == 2:
            return pair
        raise TypeError(
            f"unpack={unpack_text(unpack)} returned {described(pair)} for {described(batch)} "
            f"from {loader_name(loader)}, not an (images, targets) pair; unpack takes the "
            f"loader's batch and returns (images, targets): return the two as a tuple"
            f"{_such(batch)}"
        )
    if not isinstance(batch, Mapping):
        leave = (
            "leave unpack out: train_loop reads (images, targets) pairs as they are"
            if type(batch) in (tuple, list) and len(batch) == 2  # type: ignore[arg-type]
            else "pass unpack= a callable that takes the batch and returns (images, targets)"
        )
        raise TypeError(
            f"unpack={unpack_text(unpack)} reads a mapping batch by its keys, but "
            f"{loader_name(loader)} yielded {described(batch)}; {leave}"
        )
    images, targets = unpack
    if images in batch and targets in batch:
        return batch[images], batch[targets]
    missing = ", ".join(repr(k) for k in unpack if k not in batch)
    raise ValueError(
        f"unpack={unpack_text(unpack)}, but {loader_name(loader)} yielded a "
        f"{type(batch).__name__} with keys {_keys(batch)}, without {missing}; pass "
        f"{_unpack_fix(batch)}"
    )


def _not_a_pair(loader: object, batch: object) -> str:
    name = loader_name(loader)
    if isinstance(batch, Mapping):
        return (
            f"{name} yielded {described(batch)}, not an (images, targets) pair; train_loop reads "
            f"a mapping batch through unpack=, {UNPACK_FORMS}; pass {_unpack_fix(batch)}"
        )
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) >= 2:  # a batch of images alone
        if is_dataloader(loader):
            fix = "return (image, label) from the dataset's __getitem__"
        elif isinstance(loader, Sequence):
            fix = (
                f"make each batch of the {type(loader).__name__} a pair, as in [(images, "
                f"targets), ...], with targets such as torch.randint(0, num_classes, "
                f"({shape[0]},)) for random labels"
            )
        else:
            fix = "yield (images, targets) pairs from it"
        return (
            f"{name} yielded {described(batch)}: images without targets, not an (images, "
            "targets) pair; train_loop trains on images with their targets, which the loss "
            f"needs; {fix}"
        )
    return (
        f"{name} yielded {described(batch)}, not an (images, targets) pair; {PAIRS}; "
        f"{_pair_fix(loader)}, or pass unpack= a callable that takes the batch and returns "
        "(images, targets)"
    )


def said_batch_size(loader: object, unpack: Unpacker | None = None) -> int | None:
    """The images per batch a loader says it yields without being read: a DataLoader's
    ``batch_size`` (or its batch sampler's), a list's first batch's; ``None``: it does not say."""
    if is_dataloader(loader):
        size = getattr(loader, "batch_size", None)
        if size is None:
            size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
        return size if isinstance(size, int) else None
    if isinstance(loader, Sequence) and loader:
        try:
            images = unpacked(loader, loader[0], unpack)[0]
        except (TypeError, ValueError):
            return None
        if hasattr(images, "__len__"):
            return len(images)
    return None


def length(loader: object) -> int | None:
    """Batches in one pass, where the loader says (``len()``)."""
    try:
        return len(loader)  # type: ignore[arg-type]
    except TypeError:
        return None
