"""Deep-learning training under the gpudvfs governor in DRY RUN, on a lent GPU: nothing is set
(no clock, no power limit; NVML is opened with ``leave_clocks=True``).

    python3 validation/dl_train.py --out DIR --seconds 120          # cuda, bf16, NVML
    python3 validation/dl_train.py --out DIR --seconds 6 --tiny --device-kind sim   # CPU check

Stages (each in try/except: a failure's traceback goes to DIR/errors.txt and the next runs):

0. environment: versions, and what NVML reads (clocks, limits, energy counter) -> DIR/env.json;
   the batch size is calibrated so that a training step takes 50-200 ms;
1. a GPT-2-style Transformer (about 250M parameters; synthetic random tokens) trained through
   ``transformers.Trainer`` with `GpudvfsTrainerCallback` for half the seconds, evaluating every
   ``--eval-every`` steps (the "eval" phase) -> DIR/hf_steps.jsonl, DIR/hf_steps.summary.json;
2. the same model in a plain PyTorch loop with `GovernedTraining` for the other half, a
   "checkpoint" phase (a state_dict copy to CPU) every 50 steps and an evaluation every
   ``--eval-every`` steps -> DIR/plain_steps.jsonl, DIR/plain_steps.summary.json;
3. a short report -> stdout and DIR/report.txt.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path

#: Model sizes: (layers, width, heads, vocabulary, sequence length, batch).
FULL = dict(n_layer=16, n_embd=1024, n_head=16, vocab=50257, seq=1024, batch=16)
TINY = dict(n_layer=2, n_embd=32, n_head=2, vocab=256, seq=32, batch=4)
STEP_MS = (50.0, 200.0)  # the step time the batch is calibrated to
CHECKPOINT_EVERY = 50
EVAL_BATCHES = 4


class Run:
    def __init__(self, out: Path):
        self.out = out
        self.report: list[str] = []
        self.failed: list[str] = []

    def stage(self, name: str, fn, *args, **kwargs):
        """Run one stage; a failure is written to errors.txt (and reported), not raised."""
        t0 = time.monotonic()
        print(f"== {name}", flush=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - every failure is recorded, the next stage runs
                if isinstance(e, KeyboardInterrupt):
                    raise
                self.failed.append(name)
                with open(self.out / "errors.txt", "a", encoding="utf-8") as f:
                    f.write(f"== {name} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n{traceback.format_exc()}\n")
                print(f"   FAILED: {type(e).__name__}: {e} (traceback in errors.txt)", flush=True)
                result = None
        seen = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:300]}" for w in caught})
        for w in seen:
            print(f"   warning: {w}", flush=True)
        self.report.append(f"{name}: {'FAILED' if name in self.failed else 'ok'} in {time.monotonic() - t0:.1f} s"
                           + "".join(f"\n   warning: {w}" for w in seen))
        return result


def environment(args, out: Path) -> dict:
    import numpy
    import torch
    import transformers

    import gpudvfs

    env = {"python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
           "transformers": transformers.__version__, "numpy": numpy.__version__,
           "gpudvfs": getattr(gpudvfs, "__version__", None), "cuda": torch.cuda.is_available(),
           "args": vars(args) | {"out": str(args.out)}}
    try:
        import lightning
        env["lightning"] = lightning.__version__
    except ImportError:
        env["lightning"] = None
    if torch.cuda.is_available():
        env["cuda_device"] = torch.cuda.get_device_name(0)
    if args.device_kind == "nvml":
        from gpudvfs.hardware.nvml import NvmlDevice

        with NvmlDevice(0, leave_clocks=True) as d:  # reads only
            nv: dict = {"name": d.name}
            for key, fn in (("clocks", lambda: d.clocks), ("default_clocks", d.default_clocks),
                            ("power_limits", d.power_limits), ("power_watts", d.power_watts),
                            ("energy_joules", d.energy_joules), ("throttle_reasons", d.throttle_reasons),
                            ("memory_clocks", d.memory_clocks),
                            ("core_clocks_at_top_memory", lambda: d.core_clocks(d.memory_clocks()[0])),
                            ("clock_permissions", d.clock_permissions)):
                try:
                    nv[key] = fn()
                except Exception as e:  # noqa: BLE001 - recorded
                    nv[key] = f"{type(e).__name__}: {e}"
            env["nvml"] = nv
    (out / "env.json").write_text(json.dumps(env, indent=1, default=str) + "\n", encoding="utf-8")
    print(json.dumps({k: env[k] for k in ("torch", "transformers", "lightning", "cuda")}
                     | {"nvml": {k: v for k, v in env.get("nvml", {}).items()
                                 if k in ("name", "clocks", "default_clocks", "power_limits")}}, default=str))
    return env


def make_model(size: dict, device):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=size["vocab"], n_positions=size["seq"], n_embd=size["n_embd"],
                     n_layer=size["n_layer"], n_head=size["n_head"], bos_token_id=0, eos_token_id=0,
                     use_cache=False)
    try:
        model = GPT2LMHeadModel._from_config(cfg, attn_implementation="sdpa")
    except Exception:  # noqa: BLE001 - an older transformers: its default attention
        model = GPT2LMHeadModel(cfg)
    n = sum(p.numel() for p in model.parameters())
    print(f"   model: {n / 1e6:.1f}M parameters", flush=True)
    return model.to(device), n


def tokens(size: dict, n: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, size["vocab"], (n, size["seq"]), generator=g)


def calibrate(model, size: dict, device, bf16: bool) -> int:
    """A batch size whose forward+backward takes STEP_MS (halved on running out of memory)."""
    import torch

    if device.type != "cuda":
        return size["batch"]
    batch = size["batch"]
    for _ in range(4):
        try:
            x = torch.randint(0, size["vocab"], (batch, size["seq"]), device=device)
            times = []
            for i in range(4):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                    loss = model(input_ids=x, labels=x).loss
                loss.backward()
                torch.cuda.synchronize()
                if i:
                    times.append(1e3 * (time.perf_counter() - t0))
            model.zero_grad(set_to_none=True)
        except torch.cuda.OutOfMemoryError:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            batch = max(1, batch // 2)
            print(f"   out of memory: batch {batch}", flush=True)
            continue
        ms = sorted(times)[len(times) // 2]
        print(f"   batch {batch}: {ms:.0f} ms per forward+backward", flush=True)
        if ms < STEP_MS[0] and batch < 256:
            batch *= 2
        elif ms > STEP_MS[1] and batch > 1:
            batch //= 2
        else:
            break
    return batch


def summary_lines(title: str, s: dict | None) -> list[str]:
    if not s:
        return [f"{title}: no summary"]
    e = s["energy_j"]
    lines = [f"{title}: device {s['device']} ({s['device_kind']}), dry run {s['dry_run']}, policy {s['policy']}, "
             f"power prior {s['power_prior']}, grid {s['grid'] and s['grid']['pairs']} pairs "
             f"({s['grid'] and s['grid']['source']})",
             f"   steps {s['steps']}; energy: steps' sum {_f(e['step_sum'])} J, counter {_f(e['counter_total'])} J, "
             f"relative difference {_f(e['relative_difference'])}; sources {e['sources']}"]
    for name, p in s["phases"].items():
        w = p["would_set"]
        lines.append(f"   {name}: {p['steps']} steps, {_f(p['mean_time_ms'])} ms, {_f(p['mean_watts'])} W; "
                     + ("no decision" if w is None else
                        f"would set {w['core_mhz']:g}/{w['mem_mhz']:g} MHz, predicted saving "
                        f"{100 * w['predicted_saving']:.1f}%{' (exploring)' if w['explored'] else ''}"))
    clocks = ", ".join(f"{c['core_mhz']:g}/{c['mem_mhz']:g} x{c['steps']}" for c in s["clocks_seen"][:6])
    lines.append(f"   clocks seen: {clocks or 'none'}; throttle reasons: {s['throttle_reasons_seen'] or 'none'}; "
                 f"decisions {s['decisions']}, observations {s['observations']}, clocks set: {s['clocks_set']}")
    lines += [f"   note: {n}" for n in s["notes"]]
    return lines


def _f(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def train_hf(model, size: dict, batch: int, args, out: Path, bf16: bool, seconds: float) -> dict | None:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from gpudvfs.govern.integrations import GpudvfsTrainerCallback

    class Data(torch.utils.data.Dataset):
        def __init__(self, x):
            self.x = x

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"input_ids": self.x[i], "labels": self.x[i]}

    class TimeLimit(TrainerCallback):
        def __init__(self, seconds: float):
            self.seconds, self.t0 = seconds, None

        def on_train_begin(self, a, state, control, **kw):
            self.t0 = time.monotonic()

        def on_step_end(self, a, state, control, **kw):
            if time.monotonic() - self.t0 > self.seconds:
                control.should_training_stop = True

    cb = GpudvfsTrainerCallback(device=args.device_kind, policy=args.policy, dry_run=True,
                                log_path=out / "hf_steps.jsonl", warmup_steps=2)
    targs = TrainingArguments(
        output_dir=str(out / "hf_trainer"), max_steps=1_000_000, per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch, eval_strategy="steps", eval_steps=args.eval_every, save_strategy="no",
        logging_steps=50, report_to=[], bf16=bf16, use_cpu=not torch.cuda.is_available(), disable_tqdm=True,
        dataloader_num_workers=0, learning_rate=1e-4, seed=0)
    trainer = Trainer(model=model, args=targs, train_dataset=Data(tokens(size, 64 * batch, 1)),
                      eval_dataset=Data(tokens(size, EVAL_BATCHES * batch, 2)), callbacks=[cb, TimeLimit(seconds)])
    try:
        trainer.train()
    finally:
        if cb.summary is None:  # training raised: the summary is still written
            cb.summary = cb.session.close()
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return cb.summary


def train_plain(model, size: dict, batch: int, args, out: Path, bf16: bool, seconds: float) -> dict | None:
    import torch

    from gpudvfs.govern.integrations import GovernedTraining

    device = next(model.parameters()).device
    cuda = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    data = tokens(size, 16 * batch, 3).to(device)
    evals = tokens(size, EVAL_BATCHES * batch, 4).to(device)
    gov = GovernedTraining(device=args.device_kind, policy=args.policy, dry_run=True,
                           log_path=out / "plain_steps.jsonl", warmup_steps=2)
    model.train()
    t0, step = time.monotonic(), 0
    try:
        while time.monotonic() - t0 < seconds:
            i = (step * batch) % len(data)
            x = data[i:i + batch]
            with gov.step():
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss = model(input_ids=x, labels=x).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            step += 1
            if step % CHECKPOINT_EVERY == 0:
                with gov.phase("checkpoint"):
                    snapshot = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
                del snapshot
            if step % args.eval_every == 0:
                model.eval()
                gov.set_phase("eval")
                with torch.no_grad():
                    for j in range(EVAL_BATCHES):
                        with gov.step(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                            model(input_ids=evals[j * batch:(j + 1) * batch], labels=evals[j * batch:(j + 1) * batch])
                gov.set_phase("train")
                model.train()
    finally:
        summary = gov.close()
        del opt
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    print(f"   {step} training steps", flush=True)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the logs, summaries and report")
    ap.add_argument("--seconds", type=float, default=120.0, help="training seconds, both stages together")
    ap.add_argument("--tiny", action="store_true", help="a tiny model (a CPU check)")
    ap.add_argument("--device-kind", choices=("nvml", "sim"), default="nvml",
                    help="what the governor reads: the GPU through NVML, or the simulated GPU")
    ap.add_argument("--policy", default="energy")
    ap.add_argument("--eval-every", type=int, default=100, help="training steps between evaluations")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: calibrated on cuda)")
    args = ap.parse_args(argv)
    if not math.isfinite(args.seconds) or args.seconds <= 0:
        ap.error("--seconds must be > 0")
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out)
    t_start = time.monotonic()
    size = dict(TINY if args.tiny else FULL)
    state: dict = {}

    def setup():
        import torch

        dev = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
        state["bf16"] = dev.type == "cuda" and torch.cuda.is_bf16_supported()
        state["model"], state["params"] = make_model(size, dev)
        state["batch"] = args.batch or calibrate(state["model"], size, dev, state["bf16"])
        print(f"   device {dev}, bf16 {state['bf16']}, batch {state['batch']} x {size['seq']} tokens", flush=True)

    run.stage("0. environment (read only)", environment, args, args.out)
    run.stage("0. model and batch size", setup)
    summaries = {}
    if "model" in state:
        half = args.seconds / 2
        summaries["hf"] = run.stage("1. transformers.Trainer + GpudvfsTrainerCallback (dry run)", train_hf,
                                    state["model"], size, state["batch"], args, args.out, state["bf16"], half)
        # The second half keeps the whole run within --seconds (plus set-up) whatever the first took.
        left = max(min(half, args.seconds - (time.monotonic() - t_start) + 15.0), min(half, 5.0))
        summaries["plain"] = run.stage("2. plain PyTorch loop + GovernedTraining (dry run)", train_plain,
                                       state["model"], size, state["batch"], args, args.out, state["bf16"], left)
    lines = ["gpudvfs dl_train report (dry run: no clock or power limit was set)",
             f"model: {state.get('params', 0) / 1e6:.1f}M parameters, batch {state.get('batch')} x {size['seq']}, "
             f"bf16 {state.get('bf16')}, {time.monotonic() - t_start:.0f} s in all"]
    lines += run.report
    lines += summary_lines("Trainer", summaries.get("hf"))
    lines += summary_lines("plain loop", summaries.get("plain"))
    if run.failed:
        lines.append(f"FAILED stages: {run.failed} (see errors.txt)")
    text = "\n".join(lines)
    print(text, flush=True)
    (args.out / "report.txt").write_text(text + "\n", encoding="utf-8")
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
