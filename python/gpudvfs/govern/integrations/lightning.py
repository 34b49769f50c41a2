"""`GpudvfsLightningCallback`: the training governor in a PyTorch Lightning ``Trainer``.

Training batches are the ``"train"`` phase, validation batches (the sanity check's too) the
``"eval"`` phase; ``with callback.phase("name"):`` marks a region of a phase of its own.
``on_train_end`` (or an exception) closes the run and writes its summary
(``callback.summary``).

Imports ``lightning``: load it through ``gpudvfs.govern.integrations`` only where needed.
"""

from __future__ import annotations

from lightning.pytorch import Callback

from gpudvfs.govern.integrations.session import SessionCallback


class GpudvfsLightningCallback(SessionCallback, Callback):
    """``device`` (``"nvml"``, ``"sim"`` or a device object), ``policy``, ``dry_run`` (default
    True: no clock is set), ``log_path`` (JSONL), and any other option of `GovernedTraining`."""

    def _begin(self, phase: str) -> None:
        if not self.session.closed:
            self.session.set_phase(phase)
            self.session.step_begin()

    def _end(self) -> None:
        s = self.session
        if not s.closed and s.step_open:
            s.step_end()

    def on_fit_start(self, trainer, pl_module):
        if not self.session.closed:
            self.session.begin()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._begin("train")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._end()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._begin("eval")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._end()

    def on_validation_end(self, trainer, pl_module):
        if not self.session.closed:
            self.session.set_phase("train")

    def on_train_end(self, trainer, pl_module):
        self.summary = self.session.close()

    def on_exception(self, trainer, pl_module, exception):
        self.summary = self.session.close()
