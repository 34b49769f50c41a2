"""`GpudvfsTrainerCallback`: the training governor in a Hugging Face ``transformers.Trainer``.

Training steps (``on_step_begin`` to ``on_step_end``) are the ``"train"`` phase; evaluation
and prediction steps the ``"eval"`` phase (Hugging Face reports only their ends,
``on_prediction_step``: each runs from the end of the step before, so the first one of an
evaluation includes its set-up); ``with callback.phase("name"):`` marks a region of a phase
of its own. ``on_train_end`` closes the run and writes its summary (``callback.summary``).
Events after that (a later ``trainer.evaluate()``) are not metered.

Imports ``transformers``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from transformers import TrainerCallback

from gpudvfs.govern.integrations.session import SessionCallback


class GpudvfsTrainerCallback(SessionCallback, TrainerCallback):
    """``device`` (``"nvml"``, ``"sim"`` or a device object), ``policy``, ``dry_run`` (default
    True: no clock is set), ``log_path`` (JSONL), and any other option of `GovernedTraining`."""

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.session.closed:
            self.session.set_phase("train")
            self.session.begin()

    def on_step_begin(self, args, state, control, **kwargs):
        if not self.session.closed:
            self.session.set_phase("train")
            self.session.step_begin()

    def on_step_end(self, args, state, control, **kwargs):
        s = self.session
        if not s.closed and s.step_open:
            s.step_end()

    def on_prediction_step(self, args, state, control, **kwargs):
        if not self.session.closed:
            self.session.set_phase("eval")
            self.session.lap("eval")

    def on_evaluate(self, args, state, control, **kwargs):
        if not self.session.closed:
            self.session.set_phase("train")

    def on_predict(self, args, state, control, **kwargs):
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, args, state, control, **kwargs):
        self.summary = self.session.close()
