"""Run folders: what `attention-lab train --out DIR` writes, its lock and leftovers, following it."""
