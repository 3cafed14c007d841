"""Normalised embedding matrices: a dot product between two of them is a cosine."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float32]


def normalised(matrix: FloatMatrix) -> FloatMatrix:
    """Each row scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0.0, np.float32(1.0), norms)).astype(np.float32)
