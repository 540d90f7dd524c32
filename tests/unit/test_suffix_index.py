"""The suffix index against brute force, its memory bound, and the suffix drafter on top of it."""

import random
from collections import Counter

import numpy as np
import pytest

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.request import GenerationConfig
from specllama.decoding.suffix_drafter import SuffixDrafter, raw_confidence
from specllama.decoding.suffix_groups import draft_group, suffix_calibrator
from specllama.decoding.suffix_index import MAX_BYTES_PER_POSITION, SCALAR_APPEND, ContextKey, SuffixIndex
from tests.support import fake_llm


def brute_longest(docs, ctx, max_match):
    """Longest L <= max_match with ctx[-L:] ending before some token of some document, and the
    counts of the tokens that followed those occurrences."""
    best, follow = 0, []
    for d in docs:
        for p in range(1, len(d)):  # p: the continuation's position
            n = 0
            while n < min(max_match, len(ctx), p) and d[p - 1 - n] == ctx[-1 - n]:
                n += 1
            if n == 0:
                continue
            if n > best:
                best, follow = n, []
            if n == best:
                follow.append(d[p])
    return best, Counter(follow)


def brute_path(docs, ctx, max_match, k, support=None):
    """Most frequent path after the longest match, ties to the newest occurrence; `support` (a list)
    gets (occurrences that took each token, occurrences still on the path before it)."""
    length, _ = brute_longest(docs, ctx, max_match)
    if length == 0:
        return []
    suffix = list(ctx[-length:])
    occ = [(di, p) for di, d in enumerate(docs) for p in range(length, len(d))
           if d[p - length:p] == suffix]
    occ.sort(reverse=True)  # newest first: later document, later position
    path = []
    for j in range(k):
        nxt = [(docs[di][p + j], rank) for rank, (di, p) in enumerate(occ) if p + j < len(docs[di])]
        if not nxt:
            break
        counts = Counter(t for t, _ in nxt)
        first = {}
        for t, rank in nxt:
            first.setdefault(t, rank)
        token = min(counts, key=lambda t: (-counts[t], first[t]))
        path.append(token)
        if support is not None:
            support.append((counts[token], len(occ)))
        occ = [(di, p) for di, p in occ if p + j < len(docs[di]) and docs[di][p + j] == token]
    if len(occ) == 1 and occ[0][0] == len(docs) - 1:  # a lone occurrence in the live text (the last)...
        p = occ[0][1]
        period = len(docs[-1]) - p
        if p + len(path) == len(docs[-1]) and length >= period:  # ...ran into its end, a period or more matched
            while len(path) < k:  # the text goes on repeating itself
                path.append(path[len(path) - period])
                if support is not None:
                    support.append((1, 1))
    return path


def random_doc(rng, vocab, n, repeats=True):
    doc = [rng.randrange(vocab) for _ in range(n)]
    if repeats and n > 20:  # copy some stretches, so long matches exist
        for _ in range(3):
            a = rng.randrange(n - 10)
            ln = rng.randint(5, min(40, n - a))
            b = rng.randrange(n)
            doc[b:b] = doc[a:a + ln]
    return doc


def check_against_brute(idx, docs, ctx):
    length, ps = idx.longest_match(ctx)
    want_len, want_counts = brute_longest(docs, ctx, idx.max_match)
    assert length == want_len
    assert Counter(idx._tok[ps].tolist()) == want_counts


@pytest.mark.parametrize("seed", range(6))
def test_longest_match_and_counts_equal_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(40):
        vocab = rng.choice([2, 3, 6, 50])
        idx = SuffixIndex(max_match=rng.choice([4, 16, 64]), max_candidates=None)
        docs = []
        for _ in range(rng.randint(0, 3)):
            d = random_doc(rng, vocab, rng.randint(1, 120))
            idx.add_document(d, "job")
            docs.append(d)
        live = random_doc(rng, vocab, rng.randint(1, 150))
        for cut in sorted(rng.sample(range(1, len(live) + 1), min(4, len(live)))):
            idx.sync_live(live[:cut])  # grown in pieces, as a generation commits
            check_against_brute(idx, docs + [live[:cut]], live[:cut])
        idx.sync_live(live)
        # queries with contexts that are not the live document
        for _ in range(5):
            ctx = random_doc(rng, vocab, rng.randint(1, 70), repeats=False)
            if docs and rng.random() < 0.5:  # a context ending inside an earlier document
                d = rng.choice(docs)
                ctx = ctx + d[:rng.randint(1, len(d))]
            check_against_brute(idx, docs + [live], ctx)


@pytest.mark.parametrize("seed", range(4))
def test_a_few_candidates_compared_in_python_agree_with_the_vectorised_comparison(seed, monkeypatch):
    """longest_match compares up to SCALAR_CANDIDATES candidates in Python integers (_compare_few) and more
    with numpy: both give the same length and the same positions in the same order, bucket collisions
    (1,024 buckets for hundreds of windows) and matches cut at the retained start included."""
    from specllama.decoding import suffix_index
    rng = random.Random(100 + seed)
    for _ in range(30):
        vocab = rng.choice([2, 3, 6, 50])
        idx = SuffixIndex(token_budget=rng.choice([60, 1 << 20]), max_match=rng.choice([4, 16, 64]),
                          max_candidates=rng.choice([None, 3]))
        for _ in range(rng.randint(0, 4)):
            idx.add_document(random_doc(rng, vocab, rng.randint(1, 120)), "job")
        live = random_doc(rng, vocab, rng.randint(1, 150))
        idx.sync_live(live)
        contexts = [live[:rng.randint(1, len(live))] for _ in range(6)] + [random_doc(rng, vocab, 30, repeats=False)]
        for ctx in contexts:
            answers = []
            for few in (0, 1 << 30):  # numpy for every lookup, then Python for every lookup
                monkeypatch.setattr(suffix_index, "SCALAR_CANDIDATES", few)
                length, ps = idx.longest_match(ctx)
                answers.append((length, ps.tolist(), ps.dtype))
            assert answers[0] == answers[1]


@pytest.mark.parametrize("seed", range(4))
def test_after_truncation_and_reset_to_a_prefix(seed):
    rng = random.Random(100 + seed)
    idx = SuffixIndex(max_match=32, max_candidates=None)
    corpus = random_doc(rng, 5, 200)
    idx.add_document(corpus, "corpus")
    live = random_doc(rng, 5, 150)
    idx.sync_live(live)
    for _ in range(30):
        keep = rng.randint(0, len(live))
        live = live[:keep] + random_doc(rng, 5, rng.randint(0, 60))  # a new turn sharing a prefix
        if rng.random() < 0.5:
            idx.sync_live(live)
        else:
            idx.truncate_live(keep)
            idx.append(live[keep:])
        assert idx.live_tokens == live
        if live:
            check_against_brute(idx, [corpus, live], live)
            check_against_brute(idx, [corpus, live], live[:rng.randint(1, len(live))])


def test_document_added_while_live_keeps_both():
    rng = random.Random(7)
    idx = SuffixIndex(max_candidates=None)
    live = random_doc(rng, 4, 80)
    idx.sync_live(live)
    docs = []
    for _ in range(5):
        d = random_doc(rng, 4, 60)
        idx.add_document(d)
        docs.append(d)
        live = live + random_doc(rng, 4, 5)
        idx.sync_live(live)
        check_against_brute(idx, docs + [live], live)
    assert [d.kind for d in idx.documents] == ["job"] * 5 + ["live"]


def test_path_follows_most_frequent_continuation_like_brute_force():
    rng = random.Random(3)
    for _ in range(200):
        idx = SuffixIndex(max_match=rng.choice([3, 64]), max_candidates=None)
        docs = [random_doc(rng, 3, rng.randint(1, 60)) for _ in range(rng.randint(0, 3))]
        for d in docs:
            idx.add_document(d)
        live = random_doc(rng, 3, rng.randint(1, 60))
        idx.sync_live(live)
        k = rng.randint(1, 10)
        k = rng.choice([k, 63])  # long paths too: several occurrences agreeing for a stretch
        match, support = idx.query(live, k), []
        assert match.tokens == brute_path(docs + [live], live, idx.max_match, k, support)
        assert list(zip(match.counts, match.totals)) == support


def test_a_repeating_live_text_is_drafted_as_far_as_asked():
    """A text in a loop ("🙂🙂🙂", a separator line) matched at least one period long: the path runs
    into the live end and goes on repeating, where it stopped after a token or two."""
    idx = SuffixIndex(max_candidates=None)
    idx.sync_live([7, 1, 2, 3, 1, 2, 3, 1, 2])
    match = idx.query(idx.live_tokens, 10)
    assert match.length == 5 and match.tokens == [3, 1, 2, 3, 1, 2, 3, 1, 2, 3]
    assert match.counts == [1] * 10 and match.totals == [1] * 10
    idx.sync_live([5] * 6)
    assert idx.query(idx.live_tokens, 4).tokens == [5, 5, 5, 5]


def test_a_match_shorter_than_its_period_stops_at_the_live_end():
    # "1 2" matched 6 tokens back: the path to the end is all that is known (no second period seen)
    idx = SuffixIndex(max_candidates=None)
    idx.sync_live([1, 2, 8, 9, 4, 6, 1, 2])
    assert idx.query(idx.live_tokens, 10).tokens == [8, 9, 4, 6, 1, 2]
    # nor does a path that ends at a document's end repeat
    idx = SuffixIndex(max_candidates=None)
    idx.add_document([3, 3, 3])
    assert idx.query([3, 3], 5).tokens == [3]


def test_no_match_across_document_boundaries():
    idx = SuffixIndex(max_candidates=None)
    idx.add_document([1, 2, 3])
    idx.add_document([4, 5])
    # 3 then 4 are adjacent only across the boundary: the match is "4" alone, continued by 5
    assert idx.longest_match([3, 4])[0] == 1
    # the end of a document has no continuation: "5" occurs nowhere with a successor
    assert idx.query([5], 4).length == 0


def test_budget_bounds_memory_and_drops_oldest_first():
    budget = 5000
    idx = SuffixIndex(token_budget=budget)
    rng = np.random.default_rng(0)
    kept_ids_before = []
    for i in range(400):
        idx.add_document(rng.integers(0, 1000, size=int(rng.integers(50, 300))).tolist(), "job")
        assert idx.retained_tokens <= budget
        # stored positions never exceed twice what is retained plus the compaction slack
        assert idx.stored_positions <= 2 * budget + (1 << 14) + 1
        ids = [d.doc_id for d in idx.documents[:-1]]
        assert ids == sorted(ids) and ids[-1] == i + 1  # the newest kept, contiguous from some oldest
        assert ids == list(range(ids[0], i + 2))
        kept_ids_before = ids
    assert kept_ids_before[0] > 1  # the oldest were dropped
    assert idx.nbytes() <= MAX_BYTES_PER_POSITION * (2 * budget + (1 << 14) + 1)
    # a dropped document is no longer found; a kept one still is
    idx2 = SuffixIndex(token_budget=100, max_candidates=None)
    idx2.add_document(list(range(1000, 1080)))
    idx2.add_document(list(range(2000, 2080)))
    assert idx2.longest_match([1000, 1001])[0] == 0
    assert idx2.longest_match([2000, 2001])[0] == 2


def test_budget_never_drops_the_live_document():
    idx = SuffixIndex(token_budget=50, max_candidates=None)
    idx.add_document(list(range(30)))
    live = list(range(100, 200)) + [100, 101]
    idx.sync_live(live)
    assert [d.kind for d in idx.documents] == ["live"]
    assert idx.query(live, 3).tokens == [102, 103, 104]


def test_compaction_keeps_answers():
    rng = random.Random(11)
    idx = SuffixIndex(token_budget=3000, max_candidates=None)
    docs = []
    for _ in range(200):  # ~ 20k tokens through a 3k budget: several compactions
        d = random_doc(rng, 8, 100)
        idx.add_document(d)
        docs.append(d)
    kept = [docs[d.doc_id - 1] for d in idx.documents[:-1]]
    for _ in range(30):
        d = rng.choice(kept)
        ctx = [rng.randrange(8)] + d[:rng.randint(1, len(d))]
        check_against_brute(idx, kept, ctx)


# ---- the drafter (tests/unit/test_suffix_drafter.py has its protocol, history and the engine) -------

FLAT = lambda n: 1.0 if 1 <= n <= 16 else None  # noqa: E731


def ask(committed, k, kk="auto", seq=0):
    return [DraftRequest(seq, list(committed), k, GenerationConfig(k=kk), np.random.default_rng(0))]


def test_drafter_proposes_most_frequent_continuation():
    d = SuffixDrafter()
    text = [1, 2, 3, 7] * 3 + [1, 2, 3, 8] + [9, 1, 2, 3]
    p = d.propose(ask(text, 3, kk=3))[0]
    # after "... 9 1 2 3" the longest match is "1 2 3" (4 times): 7 three times, 8 once
    assert p.tokens[0] == 7
    assert p.q is None
    assert p.raw_confidence[0] == pytest.approx(raw_confidence([3], [4])[0])
    assert len(p.confidence) == len(p.tokens)


def test_drafter_prefers_longer_match_over_frequency():
    d = SuffixDrafter()
    text = [5, 1, 2, 9] + [1, 2, 7] * 4 + [5, 1, 2]
    assert d.propose(ask(text, 1, kk=1))[0].tokens == (9,)  # "5 1 2" once beats "1 2" four times


def test_cross_document_drafting_from_an_earlier_job():
    d = SuffixDrafter()
    system = list(range(500, 520))
    answer = [40, 41, 42, 43, 44, 45, 46, 47]
    d.prefill(0, system + [1, 2, 3])
    first = system + [1, 2, 3] + [30, 31] + answer
    d.propose(ask(first, 4))
    d.finish(0, first)  # the engine, when the sequence ends
    new = system + [4, 5] + [30, 31]
    p = d.propose(ask(new, 5, kk=5))[0]
    assert list(p.tokens) == answer[:5]
    assert p.match_length == 2 and p.where == "history"
    assert [doc.kind for doc in d.history.documents] == ["job", "live"]


def test_a_chat_turn_extending_the_live_text_is_indexed_incrementally():
    d = SuffixDrafter()
    turn1 = [1, 2, 3, 4, 5, 6]
    d.prefill(0, turn1)
    d.prefill(0, turn1 + [7, 8])  # the next turn's prompt extends the conversation
    assert d.live[0].live_tokens == turn1 + [7, 8] and d.live[0].stored_positions == 8
    d.prefill(0, [9, 9])  # an unrelated prompt in the same slot replaces the live text
    assert d.live[0].live_tokens == [9, 9]


def test_drafter_reports_the_whole_match_and_learns_from_observe():
    cal = suffix_calibrator(prior_weight=1.0)
    d = SuffixDrafter(calibrator=cal)
    text = list(range(10, 40)) + list(range(10, 20))
    # One earlier occurrence: all it matched, up to the cap, each token with its confidence (raw
    # 0.5); whether that pays is the planner's cut (tests/unit/test_suffix_drafter.py).
    p = d.propose(ask(text, 8))[0]
    assert len(p.tokens) == len(p.confidence) == 8 and p.raw_confidence == (0.5,) * 8
    # observed acceptance feeds the calibrator: full acceptance raises the 0.5 bin's prediction
    group = draft_group(p.match_length, 0)
    before = cal.predict(0.5, group=group)
    for _ in range(20):
        p = d.propose(ask(text, 4))[0]
        d.observe(0, fake_llm.judged(p, (1.0,) * len(p.tokens)))
    assert cal.predict(0.5, group=group) > 0.95 > before  # from the class's cold floor (0.85) to what it saw


def test_under_sampling_the_calibrator_learns_the_odds_not_the_coin_flips():
    """A sampled text accepts a copied token with the target's probability of it: fed those odds
    (Verdict.odds), the calibrator's estimate is that probability, whatever the draws were."""
    cal = suffix_calibrator(prior_weight=1.0)
    d = SuffixDrafter(calibrator=cal)
    text = list(range(10, 40)) + list(range(10, 20))
    p = d.propose(ask(text, 4))[0]
    group = draft_group(p.match_length, 0)
    for _ in range(200):
        d.observe(0, fake_llm.judged(p, (0.8, 0.8, 0.8, 0.8)))
    assert cal.predict(0.5, group=group) == pytest.approx(0.8, abs=0.01)


def test_load_corpus_and_missing_file(tmp_path):
    from specllama.decoding.suffix_drafter import DraftCorpusError
    path = tmp_path / "c.txt"
    path.write_text("alpha beta gamma delta\n" * 3, encoding="utf-8")
    words = {}
    tokenize = lambda s: [words.setdefault(w, len(words)) for w in s.split()]
    d = SuffixDrafter()
    assert d.load_corpus(path, tokenize) == 12
    alpha, beta = words["alpha"], words["beta"]
    p = d.propose(ask([99, alpha, beta], 2))[0]
    assert list(p.tokens) == [words["gamma"], words["delta"]]
    with pytest.raises(DraftCorpusError, match="cannot read draft corpus"):
        d.load_corpus(tmp_path / "missing.txt", tokenize)


@pytest.mark.parametrize("seed", range(4))
def test_token_by_token_appends_build_the_tables_a_bulk_append_does(seed):
    """A generation appends a token or a few a step (SuffixIndex._append_scalar, Python integers);
    a prompt arrives whole (numpy): both must leave the same hashes and chains, else a match found
    after one kind of append would be missed after the other."""
    rng = random.Random(200 + seed)
    tokens = random_doc(rng, rng.choice([3, 50]), 300)
    bulk, steps = SuffixIndex(max_candidates=None), SuffixIndex(max_candidates=None)
    bulk.add_document(tokens[:40], "job")
    steps.add_document(tokens[:40], "job")
    bulk.sync_live(tokens[40:])
    at = 40
    while at < len(tokens):
        n = rng.choice([1, 1, 2, 3, SCALAR_APPEND])
        steps.sync_live(tokens[40:at + n])
        at += n
    assert steps.live_tokens == bulk.live_tokens
    n = bulk.stored_positions
    assert steps.stored_positions == n
    assert (steps._prefix[:n + 1] == bulk._prefix[:n + 1]).all()
    for mine, theirs in zip(steps._prev, bulk._prev):
        assert (mine[:n + 1] == theirs[:n + 1]).all()
    for mine, theirs in zip(steps._heads, bulk._heads):
        assert (mine == theirs).all()


@pytest.mark.parametrize("length", [1, 3, 17, 40, 100])
def test_the_live_texts_key_read_off_the_tables_equals_hashing_it(length):
    rng = random.Random(length)
    idx = SuffixIndex(max_candidates=None)
    idx.add_document(random_doc(rng, 20, 50), "job")
    live = random_doc(rng, 20, length, repeats=False)
    idx.sync_live(live)
    read, hashed = idx.live_key(64), ContextKey.of(live, 64)
    assert read.hashes == hashed.hashes
    assert read.ctx_rev.tolist() == hashed.ctx_rev.tolist()
    for bound in (1, 2, 3, 9, 31):  # a bounded key: the windows up to the bound, the tokens it compares
        short = idx.live_key(bound)
        assert short.hashes == {n: h for n, h in hashed.hashes.items() if n <= min(bound, length)}
        assert short.ctx_rev.tolist() == hashed.ctx_rev.tolist()[:bound]
        (a, pa), (b, pb) = idx.longest_match(live, short, bound), idx.longest_match(live, hashed, bound)
        assert a == b and pa.tolist() == pb.tolist()
