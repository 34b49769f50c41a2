"""`GpudvfsLightningCallback`: the training governor in a PyTorch Lightning ``Trainer``.

Training batches are the ``"train"`` phase, validation batches (the sanity check's too) the
``"eval"`` phase; ``with callback.phase("name"):`` marks a region of a phase of its own.
``on_train_end`` (or an exception, Ctrl-C included) closes the run and writes its summary
(``callback.summary``).

Imports ``lightning``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from gpudvfs.govern.integrations.callback import SessionCallback


class GpudvfsLightningCallback(SessionCallback, Callback):
    """The training governor in a PyTorch Lightning ``Trainer`` (module notes).

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

    def _begin(self, phase: str) -> None:
        if not self.session.closed:
            self.session.set_phase(phase)
            self.session.step_begin()

    def _end(self) -> None:
        s = self.session
        if not s.closed and s.step_open:
            s.step_end()

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Begin the run.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        """
        if not self.session.closed:
            self.claim(trainer)
            self.session.begin()

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        """Begin a step of the ``"train"`` phase.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        batch : object
            The batch (not read).
        batch_idx : int
            Its index (not read).
        """
        self._begin("train")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """End the training step.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        outputs : object
            The step's outputs (not read).
        batch : object
            The batch (not read).
        batch_idx : int
            Its index (not read).
        """
        self._end()

    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        """Begin a step of the ``"eval"`` phase.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        batch : object
            The batch (not read).
        batch_idx : int
            Its index (not read).
        dataloader_idx : int
            Its data loader (not read).
        """
        self._begin("eval")

    def on_validation_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        """End the validation step.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        outputs : object
            The step's outputs (not read).
        batch : object
            The batch (not read).
        batch_idx : int
            Its index (not read).
        dataloader_idx : int
            Its data loader (not read).
        """
        self._end()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Go back to the ``"train"`` phase.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        """
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Close the run and keep its summary (``callback.summary``).

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        """
        self.summary = self.session.close()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """Close the run on the way out of an exception, and keep its summary.

        Parameters
        ----------
        trainer : lightning.pytorch.Trainer
            The trainer (not read).
        pl_module : lightning.pytorch.LightningModule
            The model (not read).
        exception : BaseException
            What was raised (Ctrl-C too): its name is the summary's ``interrupted``.
        """
        self.summary = self.session.close(interrupted=type(exception).__name__)
