"""Current decoder architectures as a user's own checkpoint: a tiny random model of each family
(built from transformers' configuration class, saved with ``save_pretrained``, run as a local
folder) is pruned by every one-shot method, retrained with MaskLoRA and PERP's head LoRA,
exported and reloaded by transformers alone with the recorded perplexity. An architecture whose
decoder layers cannot be found is refused by name before any compute."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_lm_config
from test_export_model import reloaded_perplexity

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.training.preflight import check_before_compute
from benchmark.training.runner import execute

SMALL = {
    "vocab_size": 256,  # bytes
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention
    "max_position_embeddings": 256,
}
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
# Each family's configuration class and its tiny sizes (the family's own quirks kept: Qwen2's
# attention biases, Qwen3's and Gemma's head_dim and Gemma's tied, scaled embeddings, Phi-3's
# fused qkv and gate-up maps, OPT's learned positions and tied head).
ARCHITECTURES = {
    "llama3": ("LlamaConfig", {**SMALL, "rope_theta": 500000.0, "rope_scaling": LLAMA3_ROPE}),
    "qwen2": ("Qwen2Config", SMALL),
    "qwen3": ("Qwen3Config", {**SMALL, "head_dim": 16}),
    "mistral": ("MistralConfig", SMALL),
    "gemma": ("GemmaConfig", {**SMALL, "head_dim": 16}),
    "phi3": ("Phi3Config", {**SMALL, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}),
    "opt": (
        "OPTConfig",
        {
            "vocab_size": 256,
            "hidden_size": 64,
            "ffn_dim": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 256,
            "word_embed_proj_dim": 64,
        },
    ),
}
ONE_SHOT = ("oneshot_magnitude", "wanda", "ria")


def checkpoint(folder: Path, class_name: str, kwargs: dict) -> Path:
    """A seeded random model of ``class_name``'s family saved as a local folder; skipped with
    the reason when the installed transformers lacks the class."""
    import transformers

    config_class = getattr(transformers, class_name, None)
    if config_class is None:
        pytest.skip(f"transformers {transformers.__version__} has no {class_name}")
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config_class(**kwargs)).save_pretrained(folder)
    return folder


def folder_config(folder: Path, store: Path, **method: object):
    return tiny_lm_config(
        data={"tokenizer": "bytes", "epoch_iters": 2},
        model={"name": "causal_lm", "pretrained": str(folder)},
        method={"calibration_samples": 4, **method},
        output={"dir": str(store)},
    )


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_architecture_prunes_retrains_exports_and_reloads(tmp_path: Path, arch: str) -> None:
    folder = checkpoint(tmp_path / arch, *ARCHITECTURES[arch])
    store = tmp_path / "runs"
    dense = None
    for name in ONE_SHOT:
        record = execute(folder_config(folder, store, name=name))
        m = record["metrics"]
        assert record["status"] == "finished" and m["sparsity"] == pytest.approx(0.5, abs=1e-3)
        dense = dense or m["oneshot"]["test_after_prune"]["ppl"]
        assert 1 < m["test"]["ppl"] < 1e4
    cfg = folder_config(
        folder, store, name="sparsegpt", retrain="perp", adapter="masklora", head="lora"
    )
    record = execute(cfg)
    m = record["metrics"]
    assert m["sparsity"] == pytest.approx(0.5, abs=1e-3)
    out = tmp_path / "export"
    assert main(["export-model", cfg.run_id, str(out), "--store", str(store)]) == 0
    ppl = reloaded_perplexity(out, cfg.data.max_length)
    assert ppl == pytest.approx(m["test"]["ppl"], rel=1e-5)
    # Every linear map of the decoder layers was pruned and adapted, the head adapted too.
    linears = decoder_linears(out)
    assert m["oneshot"]["merged_adapters"] == len(linears) + 1
    zeros = sum(int((w == 0).sum()) for w in linears) / sum(w.numel() for w in linears)
    assert zeros == pytest.approx(0.5, abs=1e-3)


def decoder_linears(folder: Path) -> list[torch.Tensor]:
    """The weights of the linear maps in the decoder layers of the model saved in ``folder``."""
    from transformers import AutoModelForCausalLM

    from benchmark.pruning.offload import decoder_layers

    model = AutoModelForCausalLM.from_pretrained(folder)
    layers = decoder_layers(model).modules()
    return [m.weight.detach() for m in layers if isinstance(m, torch.nn.Linear)]


def test_every_family_s_linear_maps_are_found(tmp_path: Path) -> None:
    for arch, (class_name, kwargs) in ARCHITECTURES.items():
        folder = checkpoint(tmp_path / arch, class_name, kwargs)
        check_before_compute(folder_config(folder, tmp_path / "runs", name="wanda"))
        assert len(decoder_linears(folder)) >= 2 * 3, arch  # Phi-3's fused maps: 3 per layer


@pytest.mark.parametrize(
    ("class_name", "kwargs", "says"),
    [
        (
            "GPTNeoXConfig",
            {"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4},
            "GPTNeoXForCausalLM (model_type 'gpt_neox') has none there",
        ),
    ],
)  # fmt: skip
def test_an_architecture_without_findable_layers_is_refused_by_name(
    tmp_path: Path, class_name: str, kwargs: dict, says: str
) -> None:
    folder = checkpoint(tmp_path / "model", class_name, kwargs)
    cfg = folder_config(folder, tmp_path / "runs", name="wanda")
    with pytest.raises(ConfigError) as err:
        check_before_compute(cfg)
    assert err.value.field == "model.pretrained" and says in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_a_model_type_transformers_does_not_know_is_refused_by_name(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "model", "LlamaConfig", SMALL)
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"llama"', '"my_own_llm"'))
    with pytest.raises(ConfigError) as err:
        check_before_compute(folder_config(folder, tmp_path / "runs", name="wanda"))
    assert err.value.field == "model.pretrained" and "my_own_llm" in str(err.value)


def test_mixed_sliding_window_layers_take_windows_within_the_sliding_window(tmp_path) -> None:
    # Gemma-2 alternates sliding and full attention: pruning layer by layer hands every layer
    # the first one's mask, the same for both only while a window fits the sliding window.
    kwargs = {**SMALL, "head_dim": 16, "sliding_window": 16}
    folder = checkpoint(tmp_path / "gemma2", "Gemma2Config", kwargs)
    with pytest.raises(ConfigError) as err:
        folder_config(folder, tmp_path / "runs", name="wanda")  # windows of 32 tokens
    assert err.value.field == "data.max_length" and "sliding window" in str(err.value)
    record = execute(
        tiny_lm_config(
            data={"tokenizer": "bytes", "epoch_iters": 2, "max_length": 16},
            model={"name": "causal_lm", "pretrained": str(folder)},
            method={"name": "wanda", "calibration_samples": 4},
            output={"dir": str(tmp_path / "runs")},
        )
    )
    assert record["status"] == "finished"
