"""Run vLLM's serving benchmark (`vllm bench serve`) without the `vllm` command.

    python collectors/vllm-cpu/bench_serve.py --backend vllm --model DIR --tokenizer DIR --port 8000 ...

The `vllm` command and `python -m vllm.entrypoints.cli.main` both stop at
`importlib.metadata.version("vllm")` (PackageNotFoundError: the CPU build's distribution is named
vllm-cpu), so this calls the same parser and entry point that `vllm bench serve` uses.
"""

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
