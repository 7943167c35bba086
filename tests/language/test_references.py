"""The language-model procedure where it follows the references' code on request: PERP's
training data (each document's first window, padded, the padding out of the loss), PERP's LoRA
on the output head, gradient clipping of the adapters with the model (Hugging Face's Trainer),
and the slow SentencePiece tokenizer of ``use_fast=False``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from helpers import tiny_lm_config

from benchmark.core.errors import ConfigError, DatasetError
from benchmark.data.language import IGNORE, document_batches
from benchmark.data.lm_tokenizer import load_tokenizer, transformers_major
from benchmark.training.trainer import Trainer


def lm_cfg(data: dict | None = None, optim: dict | None = None, **method: object):
    method = {"name": "wanda", "calibration_samples": 4, "retrain": "perp", **method}
    data = {"epoch_iters": 2, **(data or {})}
    return tiny_lm_config(data=data, optim=optim or {}, method=method)


def test_documents_are_truncated_padded_and_short_ones_skipped() -> None:
    docs = ["abcdefgh", "a", "xyz", "", "klmnopqrstu"]
    batches = document_batches(iter(docs), lambda t: [ord(c) for c in t], 2, 6)
    ids, targets = next(batches)
    assert ids[0].tolist() == [ord(c) for c in "abcdef"]  # truncated to the window
    assert ids[1, :3].tolist() == [ord(c) for c in "xyz"]  # "a" (one token) skipped
    assert targets[1].tolist() == [*ids[1, :3].tolist(), IGNORE, IGNORE, IGNORE]
    assert torch.equal(targets[0], ids[0])
    with pytest.raises(DatasetError, match="ran out"):
        next(batches)  # one document left for a batch of two


def test_documents_loss_is_hugging_face_s_and_padding_changes_nothing() -> None:
    cfg = lm_cfg({"train_windows": "documents"})
    trainer = Trainer(cfg)
    ids, targets = next(iter(trainer.data.train_batches(0, 0)))
    targets = targets.clone()
    targets[0, 20:], targets[2, 5:] = IGNORE, IGNORE  # two shorter documents (pydoc's are long)
    loss = trainer.task.loss(trainer.model, ids, targets)
    want = trainer.model(input_ids=ids, labels=targets).loss  # transformers' causal-LM loss
    assert torch.allclose(loss, want, rtol=1e-5)
    other = ids.masked_fill(targets == IGNORE, 7)  # other padding ids: causal, nothing changes
    assert torch.allclose(trainer.task.loss(trainer.model, other, targets), loss, rtol=1e-6)
    # The random windows' loss is the mean over the windows, unchanged.
    random_cfg = lm_cfg()
    assert random_cfg.run_id != cfg.run_id
    with pytest.raises(ConfigError, match="data.train_windows"):
        lm_cfg({"train_windows": "shuffled"})


def test_documents_batches_follow_the_seeded_document_order() -> None:
    trainer = Trainer(lm_cfg({"train_windows": "documents", "max_length": 8}))
    data = trainer.data
    first = [b[0] for b in data.train_batches(0, 0)]
    assert [b[0] for b in data.train_batches(0, 0)][0].equal(first[0])  # seeded
    assert not [b[0] for b in data.train_batches(1, 0)][0].equal(first[0])  # another epoch
    starts = {tuple(data.encode(d)[:8]) for d in data.documents}
    assert all(tuple(row.tolist()) in starts for batch in first for row in batch)


def test_perp_head_lora_trains_an_adapter_on_the_head_and_merges_it() -> None:
    trainer = Trainer(lm_cfg(head="lora", adapter="masklora"))
    head = trainer.model.get_output_embeddings()
    assert "lm_head" in trainer.method.adapters and not head.weight.requires_grad
    trained = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert id(head.weight) not in trained
    assert id(trainer.method.adapters["lm_head"].lora_A) in trained
    before = head.weight.detach().clone()
    metrics = trainer.fit()
    assert metrics is not None
    # Every pruned map's adapter and the head's merged; the head moved by the low-rank update.
    assert metrics["oneshot"]["merged_adapters"] == len(trainer.ctx.masks.params) + 1
    delta = head.weight.detach() - before
    assert delta.abs().sum() > 0 and torch.linalg.matrix_rank(delta.float()) <= 16
    assert metrics["sparsity"] == pytest.approx(0.5, abs=1e-3)
    with pytest.raises(ConfigError, match="method.head"):
        lm_cfg(head="lora", retrain="full")


def test_gradient_clipping_bounds_the_adapters_and_the_model_together() -> None:
    trainer = Trainer(lm_cfg(optim={"grad_clip": 1e-3}, head="lora"))
    params = trainer.method.clipped_parameters()
    assert {id(p) for p in trainer.method.adapters.parameters()} <= {id(p) for p in params}
    norms = []
    step = trainer.optimizer.step

    def recording_step(*args, **kwargs):
        grads = [p.grad for g in trainer.optimizer.param_groups for p in g["params"]]
        norms.append(float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g) for g in grads if g is not None]))))  # fmt: skip
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step
    trainer.fit()
    assert norms and max(norms) <= 1e-3 * (1 + 1e-4)


def sentencepiece_folder(folder: Path) -> Path:
    """A SentencePiece BPE model of CPython's documentation, as a Llama snapshot holds it."""
    from pydoc_data.topics import topics

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([topics[k] for k in sorted(topics)[:40]]),
        model_writer=model,
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=0.98,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        minloglevel=2,
        max_sentence_length=100_000,
    )
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(model.getvalue())
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    return folder


@pytest.mark.skipif(transformers_major() < 5, reason="transformers 4 has the slow class itself")
def test_slow_tokenizer_encodes_with_sentencepiece_as_the_references(tmp_path: Path) -> None:
    import sentencepiece as spm

    folder = sentencepiece_folder(tmp_path / "llama")
    sp = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    text = "def  f(x):\n\n    return x  # two  spaces"
    encode, vocab = load_tokenizer(str(folder), slow=True)
    assert encode(text) == [1, *sp.encode(text)] and vocab == 400  # BOS, as Llama's
    slow = lm_cfg({"tokenizer": str(folder), "slow_tokenizer": True})
    assert slow.run_id != lm_cfg({"tokenizer": str(folder)}).run_id
    data = Trainer(lm_cfg({"tokenizer": str(folder), "slow_tokenizer": True})).data
    assert data.encode(text) == encode(text) and data.num_classes == 400


def test_slow_tokenizer_is_refused_where_it_cannot_be_had(tmp_path: Path) -> None:
    from benchmark.data.lm_tokenizer import byte_tokenizer

    byte_tokenizer().save_pretrained(tmp_path / "bpe")
    if transformers_major() >= 5:
        with pytest.raises(ConfigError) as err:
            load_tokenizer(str(tmp_path / "bpe"), slow=True)
        assert err.value.field == "data.slow_tokenizer" and "tokenizer.model" in str(err.value)
    with pytest.raises(ConfigError, match="data.slow_tokenizer"):
        lm_cfg({"slow_tokenizer": True})  # bytes: there is no slow tokenizer to ask for
