"""Build the tiny local models that the CPU vLLM test server serves.

Run with the vLLM venv's Python (it needs torch, transformers and tokenizers):

    python collectors/vllm-cpu/build_models.py --out models

Writes three model directories under --out:

- ``target/``: a 2-layer ``LlamaForCausalLM`` (hidden 256) trained briefly on ``corpus.txt`` until it
  reproduces the corpus, so greedy completions have known answers (``coherence.toml``) and n-gram
  speculation sees real repetition;
- ``draft-copy/``: a byte-identical copy of ``target/`` (a drafter that is always right);
- ``draft-random/``: the same architecture and tokenizer with independently initialised, never trained
  weights (a drafter that is almost never right: the void arm).

It also writes ``likelihood.txt`` (a corpus passage for a teacher-forced likelihood check) and
``MANIFEST.txt`` (sha256 of every file written). Nothing is downloaded. The build is seeded and uses
deterministic algorithms; on 2 CPU cores it takes about three minutes (two of them training).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.txt"
COHERENCE = HERE / "coherence.toml"

SEED = 20260101
DRAFT_RANDOM_SEED = 7  # any seed other than SEED: the random drafter must be independent of the target
VOCAB_SIZE = 2048  # the model's embedding rows; the trained BPE may use fewer, the rest stay unused
BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
MAX_TRAIN_LEN = 128  # tokens per training example; every corpus paragraph fits
# Training budget: fixed step count (not wall time) so that the result is deterministic.
TRAIN_STEPS = 250
BATCH_SIZE = 16
LEARNING_RATE = 3e-3
WARMUP_STEPS = 20
GENERATE_TOKENS = 16

# A simple chat template so that /v1/chat/completions also works; the model was not trained on it.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)

# The likelihood passage: copied verbatim from corpus.txt (checked at build time).
LIKELIHOOD_PASSAGE = (
    "Paris is a large city on the river Seine.\n"
    "Many people visit Paris to see the old bridges and the long streets.\n"
    "When you ask where the government of France sits, the answer is Paris.\n"
)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_tokenizer(corpus_text: str) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on the corpus and wrap it for transformers and vLLM."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_text.splitlines(keepends=True), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    # Encoding adds BOS itself, so transformers and the server see the same ids for a prompt.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def model_config(tokenizer: PreTrainedTokenizerFast) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )


def training_examples(corpus_text: str, tokenizer: PreTrainedTokenizerFast) -> list[list[int]]:
    """One example per line start: BOS + the rest of that line's paragraph + EOS.

    Starting examples at every line teaches the model each line both at the start of a sequence (as
    a prompt arrives) and in its paragraph's context.
    """
    examples: list[list[int]] = []
    for paragraph in corpus_text.split("\n\n"):
        lines = paragraph.strip("\n").split("\n")
        for start in range(len(lines)):
            if not lines[start].strip():
                continue
            text = "\n".join(lines[start:]) + "\n"
            ids = tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]
            examples.append(ids[:MAX_TRAIN_LEN])
    return examples


def train(model: LlamaForCausalLM, examples: list[list[int]], pad_id: int) -> None:
    rng = np.random.default_rng(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min(1.0, (step + 1) / WARMUP_STEPS) * max(0.05, 1.0 - step / TRAIN_STEPS),
    )
    model.train()
    order: list[int] = []
    started = time.monotonic()
    for step in range(TRAIN_STEPS):
        if len(order) < BATCH_SIZE:
            order.extend(rng.permutation(len(examples)).tolist())
        batch = [examples[i] for i in order[:BATCH_SIZE]]
        del order[:BATCH_SIZE]
        width = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 50 == 0 or step == TRAIN_STEPS - 1:
            elapsed = time.monotonic() - started
            print(f"step {step:4d}  loss {loss.item():.4f}  {elapsed:6.1f} s", flush=True)
    model.eval()


def check_coherence(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast) -> bool:
    with COHERENCE.open("rb") as handle:
        prompts = tomllib.load(handle)["prompt"]
    all_pass = True
    for entry in prompts:
        encoded = tokenizer(entry["prompt"], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(
                **encoded,
                do_sample=False,
                max_new_tokens=GENERATE_TOKENS,
                pad_token_id=tokenizer.pad_token_id,
            )
        completion = tokenizer.decode(out[0, encoded["input_ids"].shape[1] :], skip_special_tokens=False)
        passed = entry["expected"] in completion
        all_pass = all_pass and passed
        print(f"{'PASS' if passed else 'FAIL'}  {entry['id']:<15} {entry['prompt']!r} -> {completion!r}")
    return all_pass


def mean_nll(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, text: str) -> float:
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return float(model(**encoded, labels=encoded["input_ids"]).loss)


def save(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, directory: Path) -> None:
    directory.mkdir(parents=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)


def manifest(out: Path) -> str:
    lines = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != "MANIFEST.txt"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.relative_to(out).as_posix()}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory to write the models into")
    parser.add_argument("--force", action="store_true", help="replace an existing --out directory")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    args = parser.parse_args(argv)

    out: Path = args.out
    if out.exists():
        if not args.force:
            print(f"{out}: already exists; pass --force to rebuild it", file=sys.stderr)
            return 2
        shutil.rmtree(out)

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    seed_everything(SEED)

    corpus_text = CORPUS.read_text(encoding="utf-8")
    if LIKELIHOOD_PASSAGE not in corpus_text:
        print(f"{CORPUS}: the likelihood passage is not in the corpus", file=sys.stderr)
        return 2

    tokenizer = build_tokenizer(corpus_text)
    config = model_config(tokenizer)
    print(f"tokenizer: {len(tokenizer)} tokens (model vocab {VOCAB_SIZE})")

    seed_everything(SEED)
    target = LlamaForCausalLM(config)
    params = sum(p.numel() for p in target.parameters())
    examples = training_examples(corpus_text, tokenizer)
    print(f"target: {params:,} parameters, {len(examples)} training examples, {TRAIN_STEPS} steps")
    train(target, examples, tokenizer.pad_token_id)

    seed_everything(DRAFT_RANDOM_SEED)
    draft_random = LlamaForCausalLM(config)
    draft_random.eval()

    save(target, tokenizer, out / "target")
    shutil.copytree(out / "target", out / "draft-copy")
    save(draft_random, tokenizer, out / "draft-random")
    (out / "likelihood.txt").write_text(LIKELIHOOD_PASSAGE, encoding="utf-8")
    (out / "MANIFEST.txt").write_text(manifest(out), encoding="utf-8")

    print(
        f"mean NLL of likelihood.txt: target {mean_nll(target, tokenizer, LIKELIHOOD_PASSAGE):.4f}, "
        f"draft-random {mean_nll(draft_random, tokenizer, LIKELIHOOD_PASSAGE):.4f} nats/token"
    )
    print("coherence (transformers generate, greedy):")
    ok = check_coherence(target, tokenizer)
    print(f"wrote {out}/target, {out}/draft-copy, {out}/draft-random, {out}/likelihood.txt")
    if not ok:
        print("coherence check failed: the target did not memorise the corpus", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
