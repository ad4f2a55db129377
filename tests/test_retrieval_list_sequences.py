"""A document list whose items have no titles is one text cut in order (a chat export's
messages, a store's untitled chunks): the answer is often a message or two after the one that
names the question's subject, and shares no word with the question. So what goes on from the
best kept item is kept too, up to ``window_chars`` of text (``retrieval_pieces._going_on``),
as the sentence after a window is, and so is the item before it, where a message names who or
what the best one's "she" or "it" is, as the sentence before a window is kept with it
(``_items_before``); a search's titled results are not read that way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.stages.retrieval import RetrievalOptions, RetrievalStage
from promptslim.stages.retrieval_lists import PREVIOUS_KEY, expand_lists, follows_of, pulled
from promptslim.stages.retrieval_pieces import SENTENCE_CHARS
from promptslim.stages.tools import ToolsStage
from promptslim.types import Document, Message, Request

QUESTION = "When is the Harbour Festival planning meeting?"
ANSWER = (
    "It starts at 4 pm on Thursday in the Lighthouse room on the second floor, and it should "
    "take about an hour."
)
SUBJECT = 6  # the message that names the subject; the answer is two after it
# a work channel's messages, long enough to read as passages (``reads_as_prose``)
CHAT = [
    (
        "Morning all, the coffee machine on floor three is broken again, so use the one by the "
        "kitchen until the technician comes."
    ),
    (
        "Has anyone seen the keys to the bike shed? They were on the hook by the door yesterday "
        "and now the hook is empty."
    ),
    (
        "The quarterly report draft is in the shared folder for review, comments by Friday please "
        "so that finance can sign it off."
    ),
    (
        "Reminder that the parking lot will be repainted over the weekend, so park on the street "
        "on Saturday and Sunday."
    ),
    (
        "Can someone water the plants while Priya is away on leave? She left the watering can "
        "under the sink in the kitchen."
    ),
    (
        "The new printer driver fixes the double-sided printing problem, install it from the IT "
        "portal when you get a moment."
    ),
    (
        "The Harbour Festival planning meeting is on the calendar for next week, everyone on the "
        "events team should come along."
    ),
    (
        "Marta is booking the room and will send the agenda round, with the budget figures from "
        "last year attached for reference."
    ),
    ANSWER,
    (
        "Lunch today is from the Thai place on the corner, put your orders in the sheet by noon "
        "and Sam will collect them."
    ),
    (
        "The fire drill on Tuesday went well, everyone was out in four minutes, which is a minute "
        "faster than the last one."
    ),
    (
        "Please close the windows in the east wing before you leave tonight, the forecast says "
        "heavy rain after midnight."
    ),
    (
        "The team photo is scheduled for the first Monday of next month, wear something you are "
        "happy to see on the website."
    ),
    (
        "Our office plants are thriving thanks to the new grow lights, even the fern by the stairs "
        "has new leaves now."
    ),
    (
        "Does anyone have a spare charger for the conference room laptop? The one in the drawer "
        "has stopped working."
    ),
    (
        "The elevator inspection will close one lift for most of the morning, so allow a few "
        "extra minutes to get upstairs."
    ),
    (
        "Congratulations to Tomas on passing his certification exam, drinks are on him at the "
        "pub on Friday evening!"
    ),
    (
        "The recycling bins are now collected on Wednesdays instead of Fridays, so put them out "
        "on Tuesday night from now on."
    ),
]


def _export(titled: bool) -> str:
    """The chat as a messaging app exports it (a channel's history), or its messages titled."""
    messages: list[dict[str, Any]] = []
    for i, text in enumerate(CHAT):
        message: dict[str, Any] = {"type": "message", "user": f"U0{i % 3}", "text": text}
        message["ts"] = f"{1700000000 + 60 * i}.000100"
        if titled:
            message["title"] = f"Note {i}: {text.split()[1]}"
        messages.append(message)
    return json.dumps(messages, indent=2)


def _kept(titled: bool, **options: Any) -> tuple[list[str], dict[str, Any]]:
    request = Request(
        messages=[Message(role="user", content=QUESTION)],
        documents=[Document(id="channel", text=_export(titled))],
    )
    out, report = RetrievalStage(scorer="bm25", **options).run_report(request)
    (document,) = out.documents
    return [m["text"] for m in json.loads(document.text)], report.details


def test_the_messages_after_the_one_naming_the_subject_are_kept() -> None:
    texts, details = _kept(titled=False)
    assert CHAT[SUBJECT] in texts and ANSWER in texts
    assert {"id": "channel$[8]", "after": "document:channel$[7]"} in details["next_pieces"]
    # without the rule (no next pieces) the answer, which shares no word, goes
    texts, _ = _kept(titled=False, next_pieces=0)
    assert CHAT[SUBJECT] in texts and ANSWER not in texts


def test_what_is_kept_after_the_best_message_is_bounded() -> None:
    """Up to ``window_chars`` of text goes on from the best message: not the whole channel."""
    texts, _ = _kept(titled=False, window_chars=250)
    after = [t for t in texts if CHAT.index(t) > SUBJECT]
    assert ANSWER in after
    assert sum(map(len, after[:-1])) < 250  # the walk stops once it holds the limit
    assert len(texts) < len(CHAT) // 2


def test_max_k_stays_a_hard_cap() -> None:
    """The next message may take another's place at ``max_k``; the ones after it fill places
    left, and take none: one kept document at most gives its place up."""
    for k in (2, 3, 4):
        request = Request(
            messages=[Message(role="user", content=QUESTION)],
            documents=[Document(id="channel", text=_export(titled=False))],
        )
        out, report = RetrievalStage(scorer="bm25", max_k=k, cutoff="none").run_report(request)
        assert len(json.loads(out.documents[0].text)) <= k
        given_up = [c for c in report.changes if "its place went to" in c.reason]
        assert len(given_up) <= 1


def test_titled_results_are_not_read_as_one_text() -> None:
    """A search's results each have a title: the next one goes on from nothing."""
    texts, details = _kept(titled=True)
    assert CHAT[SUBJECT] in texts and ANSWER not in texts
    assert "next_pieces" not in details


def test_sequences_link_an_untitled_lists_items_and_nothing_else() -> None:
    untitled = json.dumps([{"text": t} for t in CHAT[:6]])
    titled = json.dumps([{"title": f"T{i}", "text": t} for i, t in enumerate(CHAT[6:12])])
    listed = expand_lists(
        [
            Document(id="a", text=untitled),
            Document(id="b", text="A plain document."),
            Document(id="c", text=titled),
            Document(id="d", text=untitled),
        ]
    )
    assert listed is not None
    follows = listed.sequences()
    origin = listed.origin
    assert all(origin[i][0] == origin[j][0] and j == i + 1 for i, j in follows.items())
    assert {origin[i][0] for i in follows} == {0, 3}  # within each untitled list alone
    assert len(follows) == 2 * (6 - 1)


NEWCOMER = (
    "Dana Whitfield joins us on Monday from the Leeds office, after eight years running "
    "the vendor contracts there, so say hello when you see her."
)
REFERS_BACK = (
    "She will coordinate the Harbour Festival planning group, so send any festival "
    "questions to her from next week."
)


def _referring_channel() -> Request:
    """A channel whose best match for the question says "she": the name is in the message
    before it, which shares no word with the question."""
    texts = [*CHAT[:4], NEWCOMER, REFERS_BACK, *CHAT[9:]]
    messages = [{"type": "message", "user": f"U0{i % 3}", "text": t} for i, t in enumerate(texts)]
    return Request(
        messages=[Message(role="user", content="Who will coordinate the Harbour Festival?")],
        documents=[Document(id="channel", text=json.dumps(messages))],
    )


def test_the_message_before_the_best_one_is_kept() -> None:
    """The message before the best one is kept with it, as the sentence before a window is,
    and the report says why; without next pieces it is not (the pull toward a neighbour's
    score off, which would keep it too: ``test_an_item_scores_toward_its_better_neighbour``)."""
    out, report = RetrievalStage(scorer="bm25", item_pull=0).run_report(_referring_channel())
    texts = [m["text"] for m in json.loads(out.documents[0].text)]
    assert REFERS_BACK in texts and NEWCOMER in texts
    assert texts.index(NEWCOMER) + 1 == texts.index(REFERS_BACK)  # in the channel's order
    assert {"id": "channel$[4]", "before": "document:channel$[5]"} in report.details["items_before"]
    stage = RetrievalStage(scorer="bm25", next_pieces=0, item_pull=0)
    texts = [m["text"] for m in json.loads(stage.run(_referring_channel()).documents[0].text)]
    assert REFERS_BACK in texts and NEWCOMER not in texts


def test_an_item_scores_toward_its_better_neighbour() -> None:
    """A message that shares no word with the question scores half way to the best one
    beside it, and passes a cut-off that its own score does not; not with ``item_pull=0``."""
    channel = _referring_channel()
    for pull, kept in ((0.5, True), (0.0, False)):
        stage = RetrievalStage(scorer="bm25", next_pieces=0, cutoff_fraction=0.4, item_pull=pull)
        texts = [m["text"] for m in json.loads(stage.run(channel).documents[0].text)]
        assert REFERS_BACK in texts and (NEWCOMER in texts) is kept
    # a titled list's items go on from nothing: no pull
    titled = json.loads(channel.documents[0].text)
    for i, message in enumerate(titled):
        message["title"] = f"Note {i}"
    request = channel.replace(documents=[Document(id="channel", text=json.dumps(titled))])
    stage = RetrievalStage(scorer="bm25", next_pieces=0, cutoff_fraction=0.4)
    assert NEWCOMER not in stage.run(request).documents[0].text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.floats(0.0, 0.99),
    st.floats(0.01, 100.0),
    st.floats(-100.0, 100.0),
)
def test_the_pull_stays_between_an_item_and_its_neighbours(
    raw: list[float], linked: list[bool], pull: float, scale: float, shift: float
) -> None:
    """A pulled score lies between the item's own and its best neighbour's, an unlinked
    candidate's is its own, the best score stays the best, and shifting and scaling the
    scores shifts and scales the pulled ones (the cut-off's scale means the same)."""
    scores = dict(enumerate(raw))
    follows = {i: i + 1 for i in range(len(raw) - 1) if linked[i]}
    options = RetrievalOptions(item_pull=pull)
    out = pulled(scores, follows, options)
    before = {j: i for i, j in follows.items()}
    near = {
        i: [scores[j] for j in (follows.get(i), before.get(i)) if j is not None] for i in scores
    }
    for i, own in scores.items():
        assert own <= out[i] <= max([own, *near[i]])
        if not near[i]:
            assert out[i] == own
    assert max(out.values()) == max(scores.values())
    moved = pulled({i: scale * s + shift for i, s in scores.items()}, follows, options)
    for i in scores:
        assert moved[i] == pytest.approx(scale * out[i] + shift, rel=1e-9, abs=1e-6)


def test_the_message_before_takes_no_place_at_max_k() -> None:
    """At ``max_k`` the message before fills a place left, and takes none (the next message
    may take one)."""
    stage = RetrievalStage(scorer="bm25", max_k=3, cutoff="none")
    out, report = stage.run_report(_referring_channel())
    texts = [m["text"] for m in json.loads(out.documents[0].text)]
    assert len(texts) == 3 and REFERS_BACK in texts
    assert "items_before" not in report.details
    assert not [c for c in report.changes if "went to the item before" in c.reason]


def test_a_long_item_before_is_not_kept_for_this() -> None:
    """An item over ``window_chars`` is a passage of its own, not a sentence before."""
    stage = RetrievalStage(scorer="bm25", window_chars=len(NEWCOMER) - 1, item_pull=0)
    out, report = stage.run_report(_referring_channel())
    texts = [m["text"] for m in json.loads(out.documents[0].text)]
    assert REFERS_BACK in texts and not any("Dana" in t for t in texts)
    assert "items_before" not in report.details
    stage = RetrievalStage(scorer="bm25", window_chars=len(NEWCOMER), item_pull=0)
    assert NEWCOMER in json.loads(stage.run(_referring_channel()).documents[0].text)[0]["text"]


def _channel_documents(texts: list[str], *, linked: bool) -> list[Document]:
    """The messages as documents, each naming the one before (``PREVIOUS_KEY``) if linked."""
    return [
        Document(id=f"m{i}", text=t, metadata={PREVIOUS_KEY: f"m{i - 1}"} if linked and i else {})
        for i, t in enumerate(texts)
    ]


def test_documents_that_name_the_one_before_are_one_text() -> None:
    """A caller's ordered pieces, each naming the one it goes on from, are read as an
    untitled list's items: the answer two messages after the subject is kept."""
    question = [Message(role="user", content=QUESTION)]
    for linked in (True, False):
        request = Request(messages=question, documents=_channel_documents(CHAT, linked=linked))
        kept = [d.text for d in RetrievalStage(scorer="bm25").run(request).documents]
        assert CHAT[SUBJECT] in kept
        assert (ANSWER in kept) is linked


def test_an_empty_document_in_a_chain_is_dropped_and_pulls_nothing() -> None:
    """A linked document with no text is dropped as any empty one is; the pull reads the
    scores of the documents ranked, and its neighbours go on without it."""
    texts = [*CHAT[: SUBJECT + 1], "   ", *CHAT[SUBJECT + 1 :]]
    request = Request(
        messages=[Message(role="user", content=QUESTION)],
        documents=_channel_documents(texts, linked=True),
    )
    out, report = RetrievalStage(scorer="bm25").run_report(request)
    assert CHAT[SUBJECT] in [d.text for d in out.documents]
    assert any(c.reason == "empty text" for c in report.changes)


def test_follows_of_links_only_back_to_an_earlier_document() -> None:
    """A link to a later document, to an unknown id or from two documents to one is no walk
    that could go round or fork: each document goes on in at most one, always after it."""
    docs = [
        Document(id="a", text="one"),
        Document(id="b", text="two", metadata={PREVIOUS_KEY: "a"}),
        Document(id="c", text="three", metadata={PREVIOUS_KEY: "d"}),  # a later one
        Document(id="d", text="four", metadata={PREVIOUS_KEY: "a"}),  # a second claim on a
        Document(id="e", text="five", metadata={PREVIOUS_KEY: "nowhere"}),
        Document(id="f", text="six", metadata={PREVIOUS_KEY: 3}),  # not an id here
    ]
    assert follows_of(None, docs) == {0: 1}


def _read_channel(texts: list[str]) -> Request:
    """An agent's turn: the question, a ``read_channel`` call, and its result."""
    messages = [{"type": "message", "user": f"U0{i % 3}", "text": t} for i, t in enumerate(texts)]
    call = {"id": "c0", "type": "function", "function": {"name": "read_channel", "arguments": "{}"}}
    return Request.from_openai({"messages": [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": json.dumps({"messages": messages})},
    ]})  # fmt: skip


def test_a_channels_history_as_a_tool_result_is_one_text() -> None:
    """The tools stage reads a tool's untitled messages in order too: the answer two messages
    after the subject stays, and without next pieces it goes."""
    for next_pieces, kept in ((1, True), (0, False)):
        stage = ToolsStage(documents={"next_pieces": next_pieces})
        out, report = stage.run_report(_read_channel(CHAT))
        sent = out.messages[-1].text
        assert report.details["tools"][0]["kind"] == "documents"
        assert CHAT[SUBJECT] in sent and (ANSWER in sent) is kept
        assert len(sent) < len(_read_channel(CHAT).messages[-1].text) / 2


# a chat in short messages: the name is three messages before the one the question finds
SHORT = [
    "The coffee machine is broken again today.",
    "Use the one by the kitchen for now.",
    "Dana Whitfield starts with us on Monday.",
    "She comes from the Leeds office,",
    "where she ran the vendor contracts,",
    "and will coordinate the Harbour Festival group.",
    "Lunch is from the Thai place on the corner.",
    "Orders in the sheet by noon please.",
    "The fire drill went well on Tuesday.",
    "Close the east wing windows tonight.",
]


def _short_kept(**options: Any) -> list[str]:
    request = Request(
        messages=[Message(role="user", content="Who will coordinate the Harbour Festival?")],
        documents=_channel_documents(SHORT, linked=True),
    )
    kept = RetrievalStage(scorer="bm25", **options).run(request).documents
    return [d.text for d in sorted(kept, key=lambda d: SHORT.index(d.text))]


def test_short_items_before_the_best_are_kept_to_a_sentences_worth() -> None:
    """Short messages cut a sentence in three: the items before the best one are kept until
    they hold ``SENTENCE_CHARS``, the one that passes it included, and no more."""
    kept = _short_kept()
    assert SHORT[2:6] == [t for t in kept if SHORT.index(t) <= 5]
    assert sum(map(len, SHORT[3:5])) < SENTENCE_CHARS <= sum(map(len, SHORT[2:5]))


def test_at_max_k_the_items_before_come_before_the_later_items() -> None:
    """The next item takes a place, then the items before fill what is left, then the items
    after the next."""
    assert _short_kept(max_k=3) == SHORT[4:7]
    assert _short_kept(max_k=4) == SHORT[3:7]
