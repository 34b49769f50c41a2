"""`GpudvfsLightningCallback`: the training governor in a PyTorch Lightning ``Trainer``.

Imports ``lightning``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from gpudvfs.govern.integrations.callback import SessionCallback


class GpudvfsLightningCallback(SessionCallback, Callback):
    """The training governor in a PyTorch Lightning ``Trainer`` (hooks: `SessionCallback`).

    Training batches are the ``"train"`` phase, validation batches (the sanity check's too) the
    ``"eval"`` phase. An exception (Ctrl-C included) closes the run as ``on_train_end`` does.
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
        """Begin the run."""
        if not self.session.closed:
            self.claim(trainer)
            self.session.begin()

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        """Begin a step of the ``"train"`` phase."""
        self._begin("train")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """End the training step."""
        self._end()

    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        """Begin a step of the ``"eval"`` phase."""
        self._begin("eval")

    def on_validation_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        """End the validation step."""
        self._end()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Go back to the ``"train"`` phase."""
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Close the run and keep its summary (``callback.summary``)."""
        self.summary = self.session.close()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """Close the run on the way out of an exception (Ctrl-C too): its name is the summary's ``interrupted``."""
        self.summary = self.session.close(interrupted=type(exception).__name__)
