"""How much accuracy int8 recurrent layers cost (the lead in README.md here): `harken eval
--dtype int8`, whose GRU layers run torch's dynamically quantized int8 GRU built from the
folded weights (models/quantize.py; convolutions and output stay fp32), with the weight
scales chosen here: one per output row (INT8_WEIGHTS=channel, what `--dtype int8` ships) or
one per matrix (the default here, the variant it was compared with). Offline only.
Usage (repository root): [INT8_WEIGHTS=channel] python PATH/int8_accuracy.py EVAL_ARGS..."""

from __future__ import annotations

import os
import sys
import warnings

import torch

import harken_cli
from models import quantize

if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    if os.environ.get("INT8_WEIGHTS") != "channel":
        quantize.WEIGHT_QCONFIG = torch.ao.quantization.default_dynamic_qconfig
    sys.exit(harken_cli.main(["eval", *sys.argv[1:], "--dtype", "int8"]))
