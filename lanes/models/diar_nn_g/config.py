"""Named configurations of the reference model: ``full`` (the release) and ``small`` (tests)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.data.geometry import Geometry


@dataclass(frozen=True)
class SegmentationConfig:
    """PyanNet as in pyannote segmentation-3.0: SincNet, BiLSTM, linear, powerset classifier."""

    sinc_filters: int = 80
    sinc_kernel: int = 251
    sinc_stride: int = 10
    conv_channels: int = 60
    conv_kernel: int = 5
    pool: int = 3
    lstm_layers: int = 4
    lstm_hidden: int = 128
    linear: tuple[int, ...] = (128, 128)

    def frames(self, window_samples: int) -> int:
        """Output frames for one window (conv/pool arithmetic, floor division)."""
        n = (window_samples - self.sinc_kernel) // self.sinc_stride + 1
        n //= self.pool
        for _ in range(2):
            n = (n - self.conv_kernel + 1) // self.pool
        return n

    @property
    def frame_step(self) -> int:
        return self.sinc_stride * self.pool**3


@dataclass(frozen=True)
class VoiceprintConfig:
    """WeSpeaker ResNet34-style: log-mel fbank, ResNet BasicBlocks, weighted statistics pooling."""

    mel_bins: int = 80
    frame_length: int = 400  # 25 ms at 16 kHz
    frame_shift: int = 160  # 10 ms
    fft_size: int = 512
    base_channels: int = 32
    blocks: tuple[int, ...] = (3, 4, 6, 3)
    embedding_dim: int = 256

    def fbank_frames(self, window_samples: int) -> int:
        return 1 + (window_samples - self.frame_length) // self.frame_shift

    def trunk_frames(self, window_samples: int) -> int:
        t = self.fbank_frames(window_samples)
        for _ in self.blocks[1:]:  # every stage after the first halves time (3x3 conv, pad 1, stride 2)
            t = (t - 1) // 2 + 1
        return t

    def trunk_bins(self) -> int:
        f = self.mel_bins
        for _ in self.blocks[1:]:
            f = (f - 1) // 2 + 1
        return f


@dataclass(frozen=True)
class DiarConfig:
    name: str
    sample_rate: int = 16_000
    window_samples: int = 160_000
    windows_per_block: int = 8
    speakers: int = 3
    max_simultaneous: int = 2
    segmentation: SegmentationConfig = field(default_factory=SegmentationConfig)
    voiceprint: VoiceprintConfig = field(default_factory=VoiceprintConfig)

    def geometry(self) -> Geometry:
        return Geometry(
            sample_rate=self.sample_rate,
            window_samples=self.window_samples,
            frames_per_window=self.segmentation.frames(self.window_samples),
            frame_step=self.segmentation.frame_step,
            speakers=self.speakers,
            max_simultaneous=self.max_simultaneous,
            embedding_dim=self.voiceprint.embedding_dim,
            windows_per_block=self.windows_per_block,
        )

    def to_dict(self) -> dict:
        return asdict(self)


FULL = DiarConfig(name="full")

SMALL = DiarConfig(
    name="small",
    window_samples=16_000,
    segmentation=SegmentationConfig(sinc_filters=16, conv_channels=32, lstm_layers=2, lstm_hidden=32, linear=(32, 32)),
    voiceprint=VoiceprintConfig(mel_bins=40, base_channels=4, blocks=(1, 1, 1, 1), embedding_dim=32),
)

CONFIGS: dict[str, DiarConfig] = {c.name: c for c in (FULL, SMALL)}
