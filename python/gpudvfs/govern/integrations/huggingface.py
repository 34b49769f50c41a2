"""`GpudvfsTrainerCallback`: the training governor in a Hugging Face ``transformers.Trainer``.

Imports ``transformers``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from gpudvfs.govern.integrations.callback import SessionCallback


class GpudvfsTrainerCallback(SessionCallback, TrainerCallback):
    """The training governor in a Hugging Face ``transformers.Trainer`` (hooks: `SessionCallback`).

    Training steps (``on_step_begin`` to ``on_step_end``) are the ``"train"`` phase; evaluation
    and prediction steps the ``"eval"`` phase. Hugging Face reports only their ends
    (``on_prediction_step``): each runs from the end of the step before, so the first one of an
    evaluation includes its set-up. Events after ``on_train_end`` (a later ``trainer.evaluate()``)
    are not metered. The Trainer tells callbacks of no exception: a run it leaves (Ctrl-C, an
    error) is closed at exit (`closing`), or at once by
    ``callback.session.close(interrupted=...)`` (in a notebook).
    """

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs) -> None:
        """Begin the run in the ``"train"`` phase; resumed (``state.global_step`` > 0), continue its log."""
        if not self.session.closed:
            self.claim(state)
            if state.global_step > 0:
                self.session.resume(steps=state.global_step)
            self.session.set_phase("train")
            self.session.begin()

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      **kwargs) -> None:
        """Begin a training step."""
        if not self.session.closed:
            self.session.set_phase("train")
            self.session.step_begin()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs) -> None:
        """End the training step."""
        s = self.session
        if not s.closed and s.step_open:
            s.step_end()

    def on_prediction_step(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                           **kwargs) -> None:
        """Record an evaluation or prediction step, from the end of the step before."""
        if not self.session.closed:
            self.session.set_phase("eval")
            self.session.lap("eval")

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs) -> None:
        """Go back to the ``"train"`` phase after an evaluation."""
        if not self.session.closed:
            self.session.set_phase("train")

    def on_predict(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                   **kwargs) -> None:
        """Go back to the ``"train"`` phase after a prediction."""
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs) -> None:
        """Close the run and keep its summary (``callback.summary``)."""
        self.summary = self.session.close()
