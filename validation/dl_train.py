"""Deep-learning training under the gpudvfs governor in DRY RUN, on a lent GPU: nothing is set
(no clock, no power limit; NVML is opened with ``leave_clocks=True``).

    python3 validation/dl_train.py --out DIR --seconds 120          # cuda, bf16, NVML
    python3 validation/dl_train.py --out DIR --seconds 6 --tiny --device-kind sim   # CPU check

Stages (each in try/except: a failure's traceback goes to DIR/errors.txt and the next runs):

0. environment: versions, and what NVML reads (clocks, limits, energy counter) -> DIR/env.json;
   the batch size is calibrated so that a training step takes 50-200 ms;
1. for each ``--knob`` (clocks, core-clock, power-limit: a gpudvfs without ``knob=`` skips the
   latter two, saying why), a GPT-2-style Transformer (about 250M parameters; synthetic random tokens) trained through
   ``transformers.Trainer`` with `GpudvfsTrainerCallback`, evaluating every ``--eval-every`` steps
   (the "eval" phase) -> DIR/hf_steps[-KNOB].jsonl and .summary.json; then in a plain PyTorch
   loop with `GovernedTraining`, a "checkpoint" phase (a state_dict copy to CPU) every 50 steps
   and an evaluation every ``--eval-every`` steps -> DIR/plain_steps[-KNOB].jsonl and
   .summary.json. The clocks knob's plain loop also opens measurement windows
   (`gpudvfs.hardware.windows.EnergyMonitor`): the whole loop and each evaluation -> DIR/windows.json;
2. with ``--overhead``, the same Trainer and loop without gpudvfs, for the callbacks' overhead:
   each run's median period between step starts -> DIR/overhead.json;
3. a short report, with each run's advice per phase -> stdout and DIR/report.txt.
"""

from __future__ import annotations

import argparse
import gc
import inspect
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


class Skipped(Exception):
    """A stage this gpudvfs or GPU cannot run; the message says why."""


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
                if isinstance(e, Skipped):
                    print(f"   skipped: {e}", flush=True)
                    self.report.append(f"{name}: skipped: {e}")
                    return None
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
    """The summary in a few lines; its raw keys where this version's summary reads otherwise (a knob's
    grid of power limits, say)."""
    if not s:
        return [f"{title}: no summary"]
    try:
        return _summary_lines(title, s)
    except (KeyError, TypeError, ValueError) as e:
        return [f"{title}: summary read as JSON ({type(e).__name__}: {e}): {json.dumps(s, default=str)[:3000]}"]


def _summary_lines(title: str, s: dict) -> list[str]:
    e, grid = s["energy_j"], s["grid"] or {}
    size = (f"{grid['pairs']} pairs" if "pairs" in grid else f"{len(grid['core_mhz'])} core clocks" if "core_mhz" in grid
            else f"limits {grid.get('limits_w')} W")
    lines = [f"{title}: device {s['device']} ({s['device_kind']}), dry run {s['dry_run']}, policy {s['policy']}, "
             f"knob {s.get('knob', 'clocks')}, power prior {s['power_prior']}, grid {size} ({grid.get('source')})",
             f"   steps {s['steps']}; energy: steps' sum {_f(e['step_sum'])} J, counter {_f(e['counter_total'])} J, "
             f"relative difference {_f(e['relative_difference'])}; sources {e['sources']}"]
    for name, p in s["phases"].items():
        w = p["would_set"]
        shown = {} if w is None else {k: v for k, v in w.items() if k not in ("predicted_saving", "explored")}
        setting = None if w is None else (f"{w['core_mhz']:g}/{w['mem_mhz']:g} MHz" if "mem_mhz" in w else
                                          f"core {w['core_mhz']:g} MHz" if "core_mhz" in w else json.dumps(shown))
        lines.append(f"   {name}: {p['steps']} steps, {_f(p['mean_time_ms'])} ms, {_f(p['mean_watts'])} W; "
                     + ("no decision" if w is None else
                        f"would set {setting}, predicted saving "
                        f"{100 * w['predicted_saving']:.1f}%{' (exploring)' if w.get('explored') else ''}"))
    clocks = ", ".join(f"{c['core_mhz']:g}/{c['mem_mhz']:g} x{c['steps']}" for c in s["clocks_seen"][:6])
    lines.append(f"   clocks seen: {clocks or 'none'}; throttle reasons: {s['throttle_reasons_seen'] or 'none'}; "
                 f"decisions {s['decisions']}, observations {s['observations']}, clocks set: {s['clocks_set']}")
    lines += [f"   note: {n}" for n in s["notes"]]
    return lines


def _f(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def knob_option(cls, knob: str) -> dict:
    """``knob=`` for ``cls`` where it takes one; the clocks knob without it (the only one then)."""
    if "knob" in inspect.signature(cls).parameters:
        return {"knob": knob}
    if knob == "clocks":
        return {}
    raise Skipped(f"{cls.__name__} of this gpudvfs takes no knob=, so no {knob} knob")


def log_name(kind: str, knob: str | None) -> str:
    """hf_steps / plain_steps, with the knob unless it is the clocks' (the H200 run's names)."""
    return f"{kind}_steps" + ("" if knob in (None, "clocks") else f"-{knob}")


def median_period_ms(starts: list[float]) -> float | None:
    """The median time between consecutive step starts (ms): robust to the evaluations between them."""
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    return 1e3 * gaps[len(gaps) // 2] if gaps else None


def train_hf(model, size: dict, batch: int, args, out: Path, bf16: bool, seconds: float,
             knob: str | None) -> tuple[dict | None, list[float]]:
    """The Trainer for ``seconds``, governed with ``knob`` (None: without gpudvfs); its summary and step starts."""
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

    class Clock(TrainerCallback):
        """Step starts, and a stop after ``seconds``."""

        def __init__(self, seconds: float):
            self.seconds, self.t0, self.starts = seconds, None, []

        def on_train_begin(self, a, state, control, **kw):
            self.t0 = time.monotonic()

        def on_step_begin(self, a, state, control, **kw):
            self.starts.append(time.perf_counter())

        def on_step_end(self, a, state, control, **kw):
            if time.monotonic() - self.t0 > self.seconds and len(self.starts) >= args.min_steps:
                control.should_training_stop = True

    clock = Clock(seconds)
    callbacks: list = [clock]
    cb = None
    if knob is not None:
        cb = GpudvfsTrainerCallback(device=args.device_kind, policy=args.policy, dry_run=True,
                                    log_path=out / f"{log_name('hf', knob)}.jsonl", warmup_steps=2,
                                    **knob_option(GpudvfsTrainerCallback, knob))
        callbacks.insert(0, cb)
    targs = TrainingArguments(
        output_dir=str(out / "hf_trainer"), max_steps=1_000_000, per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch, eval_strategy="steps", eval_steps=args.eval_every, save_strategy="no",
        logging_steps=50, report_to=[], bf16=bf16, use_cpu=not torch.cuda.is_available(), disable_tqdm=True,
        dataloader_num_workers=0, learning_rate=1e-4, seed=0)
    trainer = Trainer(model=model, args=targs, train_dataset=Data(tokens(size, 64 * batch, 1)),
                      eval_dataset=Data(tokens(size, EVAL_BATCHES * batch, 2)), callbacks=callbacks)
    try:
        trainer.train()
    finally:
        if cb is not None and cb.summary is None:  # training raised: the summary is still written
            cb.summary = cb.session.close()
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return (None if cb is None else cb.summary), clock.starts


def train_plain(model, size: dict, batch: int, args, out: Path, bf16: bool, seconds: float,
                knob: str | None, windows: bool = False) -> tuple[dict | None, list[float]]:
    """The plain loop for ``seconds``, governed with ``knob`` (None: without gpudvfs); its summary and
    step starts. ``windows``: measurement windows around the loop and each evaluation -> windows.json."""
    import contextlib

    import torch

    from gpudvfs.govern.integrations import GovernedTraining

    device = next(model.parameters()).device
    cuda = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    data = tokens(size, 16 * batch, 3).to(device)
    evals = tokens(size, EVAL_BATCHES * batch, 4).to(device)
    gov = None if knob is None else GovernedTraining(
        device=args.device_kind, policy=args.policy, dry_run=True, log_path=out / f"{log_name('plain', knob)}.jsonl",
        warmup_steps=2, **knob_option(GovernedTraining, knob))
    step_ctx = gov.step if gov is not None else contextlib.nullcontext
    monitor = None
    if windows:
        from gpudvfs.hardware.windows import EnergyMonitor

        monitor = EnergyMonitor([0], device=args.device_kind)
        monitor.begin_window("loop")
    measured: list = []
    model.train()
    t0, step, starts, summary = time.monotonic(), 0, [], None
    try:
        while time.monotonic() - t0 < seconds or step < args.min_steps:
            i = (step * batch) % len(data)
            x = data[i:i + batch]
            starts.append(time.perf_counter())
            with step_ctx():
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss = model(input_ids=x, labels=x).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            step += 1
            if step % CHECKPOINT_EVERY == 0:
                with gov.phase("checkpoint") if gov is not None else contextlib.nullcontext():
                    snapshot = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
                del snapshot
            if step % args.eval_every == 0:
                model.eval()
                if gov is not None:
                    gov.set_phase("eval")
                with torch.no_grad(), monitor.window(f"eval-{step}") if monitor else contextlib.nullcontext() as w:
                    for j in range(EVAL_BATCHES):
                        with step_ctx(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                            model(input_ids=evals[j * batch:(j + 1) * batch], labels=evals[j * batch:(j + 1) * batch])
                if w is not None:
                    measured.append(w)
                if gov is not None:
                    gov.set_phase("train")
                model.train()
    finally:
        if gov is not None:
            summary = gov.close()
        if monitor is not None:
            loop = monitor.end_window("loop")
            monitor.close()
            write_windows(out, [loop] + [w.measurement for w in measured if w.measurement is not None],
                          monitor.notes, summary, out / f"{log_name('plain', knob)}.jsonl")
        del opt
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    print(f"   {step} training steps", flush=True)
    return summary, starts


def write_windows(out: Path, windows: list, notes: dict, summary: dict | None, log: Path) -> None:
    """The windows beside what the governor's meter read: the loop's against the counter's total over
    the run, each evaluation's against the sum of its steps' energies (the log's eval steps, in blocks
    of EVAL_BATCHES). With --device-kind sim the monitor reads a simulated GPU of its own, not the
    governor's: the comparison means something on a real GPU alone."""
    evals = []
    if log.exists():
        steps = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        evals = [r.get("joules") for r in steps if r.get("kind") == "step" and r.get("phase") == "eval"]
    rows = []
    for k, w in enumerate(windows):
        row = {"name": w.name, "time_s": w.time_s, "gpu_joules": w.gpu_joules.get(0), "source": w.gpu_source.get(0),
               "cpu_joules": sum(w.cpu_joules.values()) if w.cpu_joules else None}
        if w.name == "loop":
            row["meter"] = "counter_total", None if summary is None else summary["energy_j"]["counter_total"]
        else:
            block = evals[(k - 1) * EVAL_BATCHES:k * EVAL_BATCHES]
            row["meter"] = "eval steps' sum", (sum(block) if len(block) == EVAL_BATCHES and None not in block else None)
        rows.append(row)
    (out / "windows.json").write_text(json.dumps({"windows": rows, "notes": notes}, indent=1) + "\n", encoding="utf-8")


def window_lines(out: Path) -> list[str]:
    if not (out / "windows.json").exists():
        return ["windows: none"]
    lines = []
    for r in json.loads((out / "windows.json").read_text(encoding="utf-8"))["windows"]:
        what, meter = r["meter"]
        diff = "-" if meter is None or r["gpu_joules"] is None else f"{100 * (r['gpu_joules'] / meter - 1):+.2f}%"
        lines.append(f"window {r['name']}: {r['time_s']:.2f} s, {_f(r['gpu_joules'])} J ({r['source']}); "
                     f"{what} {_f(meter)} J: {diff}")
    return lines


def advice_lines(s: dict | None) -> list[str]:
    """The summary's advice per phase, as the integrations print it (raw where this gpudvfs has no table)."""
    if not s or "advice" not in s:
        return ["   advice: none in this summary"]
    try:
        from gpudvfs.govern.advice import advice_table

        return ["   " + line for line in advice_table(s).splitlines()]
    except Exception as e:  # noqa: BLE001 - another version's table: the raw advice
        return [f"   advice ({type(e).__name__} from advice_table): {json.dumps(s['advice'], default=str)}"]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the logs, summaries and report")
    ap.add_argument("--seconds", type=float, default=120.0, help="training seconds, every run together")
    ap.add_argument("--tiny", action="store_true", help="a tiny model (a CPU check)")
    ap.add_argument("--device-kind", choices=("nvml", "sim"), default="nvml",
                    help="what the governor reads: the GPU through NVML, or the simulated GPU")
    ap.add_argument("--policy", default="energy")
    ap.add_argument("--knob", action="append", choices=("clocks", "core-clock", "power-limit"),
                    help="the knob governed in dry run, repeatable (default: clocks)")
    ap.add_argument("--overhead", action="store_true",
                    help="also train without gpudvfs: the callbacks' overhead per step")
    ap.add_argument("--eval-every", type=int, default=100, help="training steps between evaluations")
    ap.add_argument("--min-steps", type=int, default=0,
                    help="steps each run takes however long they last (a check on a loaded machine)")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: calibrated on cuda)")
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if not math.isfinite(args.seconds) or args.seconds <= 0:
        ap.error("--seconds must be > 0")
    if args.min_steps < 0:
        ap.error("--min-steps must be >= 0")
    knobs = list(dict.fromkeys(args.knob or ["clocks"]))
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
    summaries: dict = {}
    periods: dict = {}
    if "model" in state:
        # Each knob's two runs (and with --overhead the two without gpudvfs) share --seconds; a run's share shrinks
        # when the earlier ones overran, so that the whole stays within --seconds plus set-up.
        plan = [(kind, knob) for knob in knobs for kind in ("hf", "plain")]
        plan += [("hf", None), ("plain", None)] if args.overhead else []
        for n, (kind, knob) in enumerate(plan):
            share = args.seconds / len(plan)
            left = args.seconds - (time.monotonic() - t_start) + 15.0
            seconds = max(min(share, left / (len(plan) - n)), min(share, 3.0))
            governed = ("transformers.Trainer + GpudvfsTrainerCallback" if kind == "hf"
                        else "plain loop + GovernedTraining")
            title = (f"1. {governed} (dry run, knob {knob})" if knob else
                     f"2. {'transformers.Trainer' if kind == 'hf' else 'plain loop'} without gpudvfs")
            fn = train_hf if kind == "hf" else train_plain
            extra = {"windows": True} if kind == "plain" and knob == knobs[0] else {}
            got = run.stage(title, fn, state["model"], size, state["batch"], args, args.out, state["bf16"], seconds,
                            knob, **extra)
            if got is not None:
                summaries[(kind, knob)], periods[(kind, knob)] = got
    overhead = {f"{kind} {knob or 'without gpudvfs'}": {"steps": len(s), "median_period_ms": median_period_ms(s)}
                for (kind, knob), s in periods.items()}
    (args.out / "overhead.json").write_text(json.dumps(overhead, indent=1) + "\n", encoding="utf-8")
    lines = ["gpudvfs dl_train report (dry run: no clock or power limit was set)",
             f"model: {state.get('params', 0) / 1e6:.1f}M parameters, batch {state.get('batch')} x {size['seq']}, "
             f"bf16 {state.get('bf16')}, {time.monotonic() - t_start:.0f} s in all"]
    lines += run.report
    for (kind, knob), summary in summaries.items():
        if knob is not None:
            lines += summary_lines(f"{'Trainer' if kind == 'hf' else 'plain loop'}, knob {knob}", summary)
            lines += advice_lines(summary)
    lines += window_lines(args.out)
    for kind in ("hf", "plain"):
        bare = overhead.get(f"{kind} without gpudvfs", {}).get("median_period_ms")
        for knob in knobs:
            gov = overhead.get(f"{kind} {knob}", {}).get("median_period_ms")
            if bare and gov:
                lines.append(f"overhead, {kind} {knob}: {gov:.2f} ms a step against {bare:.2f} ms without gpudvfs "
                             f"({100 * (gov / bare - 1):+.2f}%)")
    if run.failed:
        lines.append(f"FAILED stages: {run.failed} (see errors.txt)")
    text = "\n".join(lines)
    print(text, flush=True)
    (args.out / "report.txt").write_text(text + "\n", encoding="utf-8")
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
