"""`GpudvfsTrainerCallback`: the training governor in a Hugging Face ``transformers.Trainer``.

Training steps (``on_step_begin`` to ``on_step_end``) are the ``"train"`` phase; evaluation
and prediction steps the ``"eval"`` phase (Hugging Face reports only their ends,
``on_prediction_step``: each runs from the end of the step before, so the first one of an
evaluation includes its set-up); ``with callback.phase("name"):`` marks a region of a phase
of its own. ``on_train_end`` closes the run and writes its summary (``callback.summary``).
Events after that (a later ``trainer.evaluate()``) are not metered. The Trainer tells callbacks
of no exception: a run it leaves (Ctrl-C, an error) is closed at exit (`closing`), or at once by
``callback.session.close(interrupted=...)`` (in a notebook).

Imports ``transformers``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from gpudvfs.govern.integrations.callback import SessionCallback


class GpudvfsTrainerCallback(SessionCallback, TrainerCallback):
    """The training governor in a Hugging Face ``transformers.Trainer`` (module notes).

    Parameters
    ----------
    device : str or object
        ``"nvml"``, ``"sim"`` or a device object.
    policy : str
        One of `GOVERNOR_POLICIES`.
    dry_run : bool
        Set no clock (the default).
    log_path : str or pathlib.Path or None
        A JSONL file of the steps and decisions.
    knob : str
        ``"clocks"`` or ``"power-limit"`` (`GovernedTraining`).
    **options
        Any other option of `GovernedTraining`.
    """

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs) -> None:
        """Begin the run in the ``"train"`` phase; resumed from a checkpoint, continue its log (`resume`).

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state: ``global_step`` > 0 where resumed.
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        if not self.session.closed:
            self.claim(state)
            if state.global_step > 0:
                self.session.resume(steps=state.global_step)
            self.session.set_phase("train")
            self.session.begin()

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      **kwargs) -> None:
        """Begin a training step.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        if not self.session.closed:
            self.session.set_phase("train")
            self.session.step_begin()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs) -> None:
        """End the training step.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        s = self.session
        if not s.closed and s.step_open:
            s.step_end()

    def on_prediction_step(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                           **kwargs) -> None:
        """Record an evaluation or prediction step, from the end of the step before.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        if not self.session.closed:
            self.session.set_phase("eval")
            self.session.lap("eval")

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs) -> None:
        """Go back to the ``"train"`` phase after an evaluation.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        if not self.session.closed:
            self.session.set_phase("train")

    def on_predict(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                   **kwargs) -> None:
        """Go back to the ``"train"`` phase after a prediction.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs) -> None:
        """Close the run and keep its summary (``callback.summary``).

        Parameters
        ----------
        args : transformers.TrainingArguments
            The trainer's arguments (not read).
        state : transformers.TrainerState
            Its state (not read).
        control : transformers.TrainerControl
            Its control flags (not read).
        **kwargs
            The trainer's other arguments (not read).
        """
        self.summary = self.session.close()
