"""bench/recipes.py: the SFT stage every training bench starts from is the recipe's, and an option
given on the command line changes that one setting only (the benches and the GPU script agree on
the stage by not repeating it)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("recipes_bench", ROOT / "bench" / "recipes.py")
recipes = sys.modules["recipes_bench"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipes)


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    recipes.add_sft_arguments(parser)
    return parser.parse_args(list(argv))


def test_no_option_keeps_the_recipe_s_stage() -> None:
    for recipe in recipes.RECIPES.values():
        assert recipes.sft_stage(recipe, parsed(), quick=False) == recipe.sft


def test_an_option_changes_its_setting_only() -> None:
    recipe = recipes.RECIPES["flights"]
    stage = recipes.sft_stage(recipe, parsed("--sft-lr", "1e-4", "--sft-batch", "8"), quick=False)
    assert (stage.lr, stage.batch) == (1e-4, 8)
    assert (stage.episodes, stage.epochs) == (recipe.sft.episodes, recipe.sft.epochs)
    assert recipes.sft_stage(recipe, parsed(), quick=True).episodes == 16
    assert recipes.sft_stage(recipe, parsed("--sft-episodes", "5"), quick=True).episodes == 5


def test_the_stage_reaches_the_sft_config(tmp_path: Path) -> None:
    recipe = recipes.RECIPES["flights"]
    stage = recipes.SFTStage(7, epochs=3, lr=1e-3, batch=2)
    cfg = recipes.sft_config(recipe, stage, tmp_path / "data.jsonl", tmp_path)
    assert (cfg.epochs, cfg.lr, cfg.micro_batch, cfg.max_tokens) == (3, 1e-3, 2, recipe.max_tokens)


def test_the_gpu_script_passes_only_the_sft_options_it_is_given(tmp_path: Path) -> None:
    """`gpu_two_stage.sh` run with a stand-in interpreter that prints its arguments (and claims a GPU
    for the script's check): no `--sft-*` option unless its variable is set."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\ncase "$1" in -) cat >/dev/null; exit 0;; -c) exit 1;; esac\necho "$@"\n')
    fake.chmod(0o755)

    def argv(**variables: str) -> str:
        done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_two_stage.sh")], capture_output=True,
                              text=True, check=True, env={**os.environ, "PY": str(fake), **variables})
        return done.stdout

    assert "--sft-" not in argv()
    given = argv(SFT_LR="1e-4", SFT_EPISODES="9")
    assert "--sft-episodes 9" in given and "--sft-lr 1e-4" in given
    assert "--sft-epochs" not in given and "--sft-batch" not in given
