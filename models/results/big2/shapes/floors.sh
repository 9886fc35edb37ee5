#!/bin/bash
# every shape priced one after the other on the idle machine, the two trained models first
cd /work/main
.venv/bin/harken floor --bundle /tmp/old_default --out /tmp/shapes/floor_3x384_shipped
.venv/bin/harken floor --bundle runs/big2/candidate --out /tmp/shapes/floor_5x512_big2
for n in 5x512t7 5x384 4x512 3x512; do
  .venv/bin/harken floor --bundle /tmp/shapes/run_$n/bundle --out /tmp/shapes/floor_$n
done
