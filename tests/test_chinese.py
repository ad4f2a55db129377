"""Chinese and mixed-language text: segmentation, analysis, protected spans, and the
stages on Chinese requests. The QA set below is hand-written; nothing is downloaded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptslim import scripts
from promptslim import text as text_module
from promptslim.backends.compress.extractive import bm25
from promptslim.backends.summarisers import ExtractiveSummariser
from promptslim.errors import BackendUnavailable, BudgetInfeasible
from promptslim.pipeline import Pipeline
from promptslim.scripts import fold_alnum_width
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.text import (
    analyse,
    dominant_script,
    find_protected_spans,
    normalise_width,
    script_spans,
    split_sentences,
)
from promptslim.tokens import count_document, count_request, get_counter
from promptslim.types import Budget, Document, Message, Request, Result

HAS_JIEBA = text_module.chinese_segmenter("auto") == "jieba"


def sentences(text: str) -> list[str]:
    return [s.of(text) for s in split_sentences(text)]


# ---------------------------------------------------------------- segmentation


def test_chinese_paragraph_splits_at_chinese_enders_without_spaces() -> None:
    text = "今天天气很好。我们去公园散步吧！你带伞了吗？带了；不过可能用不上……走吧。"
    assert sentences(text) == [
        "今天天气很好。",
        "我们去公园散步吧！",
        "你带伞了吗？",
        "带了；",
        "不过可能用不上……",  # "……" is one ender, not two
        "走吧。",
    ]


def test_closing_quotes_and_brackets_stay_with_their_sentence() -> None:
    text = "他回答：「好的，明天见。」然后挂了电话。（这是第二次了！）她说：“不行。”"
    assert sentences(text) == [
        "他回答：「好的，明天见。」然后挂了电话。",  # 。 inside a quotation does not end it
        "（这是第二次了！）",
        "她说：“不行。”",
    ]


def test_mixed_chinese_english_and_code() -> None:
    text = (
        "请用Python写一个函数。It should return the sum.真的可以吗?当然。\n"
        "```python\ndef add(a, b):\n    return a + b  # 求和。不要拆开\n```\n"
        "版本是v1.2.3，详见https://example.com/docs/安装。"
    )
    got = sentences(text)
    assert got[:4] == ["请用Python写一个函数。", "It should return the sum.", "真的可以吗?", "当然。"]
    assert got[4].startswith("```python") and got[4].endswith("```")  # the code block is whole
    assert got[5] == "版本是v1.2.3，详见https://example.com/docs/安装。"


def test_spans_index_the_original_text() -> None:
    text = "第一句。  第二句！\n\n第三句"
    assert all(s.of(text) == text[s.start : s.end] for s in split_sentences(text))
    assert sentences(text) == ["第一句。", "第二句！", "第三句"]


# ---------------------------------------------------------------- scripts and widths


def test_width_folding_keeps_length_and_cjk_punctuation() -> None:
    assert normalise_width("ＧＰＴ－４，１２３！　好。") == "GPT-4,123! 好。"
    assert len(normalise_width("ＡＢＣ")) == 3


def _folded(text: str, *, punctuation: bool) -> str:
    """Full-width ASCII and the ideographic space folded one character at a time."""
    out = []
    for ch in text:
        wide = "\uff01" <= ch <= "\uff5e"
        half = chr(ord(ch) - 0xFEE0) if wide else " " if ch == "\u3000" else ch
        out.append(half if punctuation or half.isalnum() else ch)
    return "".join(out)


@given(st.text(alphabet="aZ9 .!é–好。\u3000\uff01\uff0e\uff11\uff21\uff41\uff5e\uff5f"))
def test_width_folds_change_exactly_the_full_width_characters(text: str) -> None:
    assert normalise_width(text) == _folded(text, punctuation=True)
    assert fold_alnum_width(text) == _folded(text, punctuation=False)


def test_full_width_letters_and_digits_analyse_like_half_width() -> None:
    assert analyse("ＰｏｓｔｇｒｅＳＱＬ １６") == analyse("PostgreSQL 16") == ["postgresql", "16"]


def test_script_spans_and_dominant_script() -> None:
    text = "hello 世界 abc, 123 日本語です"
    assert [(s.kind, s.of(text)) for s in script_spans(text)] == [
        ("latin", "hello "),
        ("cjk", "世界 "),
        ("latin", "abc, 123 "),
        ("cjk", "日本語です"),
    ]
    assert dominant_script("请把PostgreSQL数据库迁移到新的服务器上") == "cjk"
    assert dominant_script("Migrate the database 到新服务器") == "latin"
    assert dominant_script("123 !!") == ""


def _weighed_script(text: str) -> str:
    """``dominant_script`` the long way: every run weighed, with no shortcut for Latin text."""
    weight: dict[str, int] = {}
    for m in scripts._SCRIPT_RUN.finditer(normalise_width(text)):
        kind = scripts._script_of(m.group())
        weight[kind] = weight.get(kind, 0) + len(m.group()) * (3 if kind == "cjk" else 1)
    return max(sorted(weight), key=weight.__getitem__) if weight else ""


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZé ß1,.ÀɏɐαЖ世ｈＡ１，\u3000ª²", max_size=30))
def test_dominant_script_shortcut_agrees_with_weighing_every_run(text: str) -> None:
    # Latin text (accents included) skips the weighing; mixed text must not
    assert dominant_script(text) == _weighed_script(text)


# ---------------------------------------------------------------- analysis


def test_mixed_text_gets_both_analysers() -> None:
    terms = analyse("我们在会议室讨论了PostgreSQL的迁移方案")
    assert "postgresql" in terms
    assert "的" not in terms and "我们" not in terms  # Chinese stopwords dropped
    if HAS_JIEBA:
        assert {"会议室", "讨论", "迁移", "方案"} <= set(terms)
    bigrams = analyse("迁移方案", chinese="bigram")
    assert bigrams == ["迁移", "移方", "方案"]


def test_jieba_mode_without_jieba_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_module, "_jieba_state", {"missing": True})
    assert text_module.chinese_segmenter("auto") == "bigram"
    assert analyse("迁移方案") == ["迁移", "移方", "方案"]
    with pytest.raises(BackendUnavailable, match=r"promptslim\[zh\]"):
        analyse("迁移方案", chinese="jieba")


@pytest.mark.skipif(not HAS_JIEBA, reason="jieba not installed")
def test_jieba_loads_once_under_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_module, "_jieba_state", {})
    text_module._jieba_words.cache_clear()
    text_module._analyse.cache_clear()
    results: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(analyse("北京是中国的首都，也是文化中心")))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r == results[0] for r in results)
    assert "北京" in results[0] and "首都" in results[0]


def test_import_promptslim_does_not_import_jieba() -> None:
    code = "import sys, promptslim, promptslim.text; print('jieba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- BM25 on a Chinese QA set

PASSAGES = [
    "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。",
    "大熊猫主要生活在四川、陕西和甘肃的山区，以竹子为主要食物，是中国的国宝。",
    "故宫位于北京中轴线的中心，是明清两代的皇家宫殿，旧称紫禁城。",
    "西湖位于浙江省杭州市西部，以秀丽的湖光山色和众多的名胜古迹闻名。",
    "黄河是中国第二长河，发源于青海省巴颜喀拉山脉，最终注入渤海。",
    "春节是中国最重要的传统节日，人们会贴春联、吃饺子、放鞭炮迎接新年。",
    "高铁是高速铁路的简称，中国的高铁运营里程已经超过四万公里，居世界第一。",
    "茶起源于中国，绿茶、红茶和乌龙茶是最常见的品种，龙井茶产自杭州。",
    "造纸术是中国古代四大发明之一，东汉时期的蔡伦改进了造纸方法。",
    "上海是中国最大的经济中心城市，浦东新区的陆家嘴是著名的金融区。",
    "敦煌莫高窟位于甘肃省，保存了从四世纪到十四世纪的大量壁画和佛像。",
    "粤语主要在广东、香港和澳门使用，保留了许多古汉语的发音特点。",
]
QUESTIONS = [
    ("长城西边的终点是哪个关口？", 0),
    ("大熊猫平时吃什么？", 1),
    ("紫禁城是哪两个朝代的宫殿？", 2),
    ("西湖在哪个城市？", 3),
    ("黄河的发源地在哪里？", 4),
    ("过春节的时候人们有哪些习俗？", 5),
    ("中国高速铁路的运营里程有多长？", 6),
    ("龙井茶的产地是哪里？", 7),
    ("是谁改进了造纸的方法？", 8),
    ("陆家嘴金融区在哪个城市？", 9),
    ("莫高窟的壁画是什么年代的？", 10),
    ("哪些地方的人说粤语？", 11),
]


def recall_at(k: int, analyser: object) -> float:
    docs = [analyser(p) for p in PASSAGES]  # type: ignore[operator]
    hits = 0
    for question, gold in QUESTIONS:
        scores = bm25(analyser(question), docs)  # type: ignore[operator]
        ranked = sorted(range(len(PASSAGES)), key=lambda i: (-scores[i], i))
        hits += gold in ranked[:k]
    return hits / len(QUESTIONS)


def whitespace(text: str) -> list[str]:
    return text.lower().split()


@pytest.mark.parametrize("mode", ["auto", "bigram"])
def test_chinese_analyser_beats_whitespace_tokenisation(mode: str) -> None:
    chinese = recall_at(3, lambda t: analyse(t, chinese=mode))  # type: ignore[arg-type]
    baseline = recall_at(3, whitespace)
    assert chinese >= 0.9
    assert chinese > baseline + 0.5  # whitespace "words" are whole clauses: nothing matches
    assert recall_at(1, lambda t: analyse(t, chinese=mode)) >= 0.75  # type: ignore[arg-type]


# ---------------------------------------------------------------- protected spans


def test_protected_spans_next_to_chinese_characters() -> None:
    text = (
        "访问https://example.com/a?b=1获取文档，或发邮件到ops@example.com联系我们。"
        "订单550e8400-e29b-41d4-a716-446655440000的金额是3,500元，共１２件，耗时15ms。"
    )
    found = {(s.kind, s.of(text)) for s in find_protected_spans(text)}
    assert ("url", "https://example.com/a?b=1") in found
    assert ("email", "ops@example.com") in found
    assert ("uuid", "550e8400-e29b-41d4-a716-446655440000") in found
    assert ("number_unit", "3,500元") in found
    assert ("number_unit", "１２件") in found  # full-width digits, original bytes
    assert ("number_unit", "15ms") in found


def test_full_width_punctuation_ends_a_url() -> None:
    # folded to "!" and ",", full-width punctuation let a URL run on into what followed it
    text = "详见https://example.com/a，b项也要看。链接https://x.cn/a?b=1！550e8400-e29b-41d4-a716-446655440000"
    found = [(s.kind, s.of(text)) for s in find_protected_spans(text, kinds=("url", "uuid"))]
    assert found == [
        ("url", "https://example.com/a"),
        ("url", "https://x.cn/a?b=1"),
        ("uuid", "550e8400-e29b-41d4-a716-446655440000"),
    ]
    wide = "见https://ｅｘａｍｐｌｅ.com/a。"
    assert [s.of(wide) for s in find_protected_spans(wide, kinds=("url",))] == ["https://ｅｘａｍｐｌｅ.com/a"]


def test_chinese_dates_and_times_are_found() -> None:
    text = "会议在2026年11月30日（星期一）下午3点举行，12月1日15点30分复盘，周五截止。注意以下3点。每周一例会。"
    found = [(s.kind, s.of(text)) for s in find_protected_spans(text, kinds=("zh_date", "zh_time", "zh_weekday"))]
    assert found == [
        ("zh_date", "2026年11月30日"),
        ("zh_weekday", "星期一"),
        ("zh_time", "下午3点"),
        ("zh_date", "12月1日"),
        ("zh_time", "15点30分"),
        ("zh_weekday", "周五"),
    ]  # not "3点" ("3 points") nor "每周一" (a standing rule)


# ---------------------------------------------------------------- stages


def chat(system: str, user: str = "你好") -> Request:
    return Request(messages=[Message(role="system", content=system), Message(role="user", content=user)])


def test_prefix_moves_chinese_dates_out_of_the_stable_prefix() -> None:
    template = "你是客服助手。今天是{d}（{w}），现在是{t}。请注意以下3点：回答要简洁。"
    a = PrefixStage().run(chat(template.format(d="2026年11月30日", w="星期一", t="下午3点15分")))
    b = PrefixStage().run(chat(template.format(d="2026年12月1日", w="星期二", t="上午9点")))
    assert a.messages[0].content == b.messages[0].content  # byte-stable prefix
    assert "2026" not in a.messages[0].content and "3点" in a.messages[0].content
    context = a.messages[1].content or ""
    for value in ("2026年11月30日", "星期一", "下午3点15分"):
        assert value in context  # moved verbatim, not lost
    assert a.messages[-1].content == "你好"


LONG_DOC = (
    "订单服务部署在上海的两个机房。"
    "每天凌晨两点会自动备份数据库，备份保存在https://backup.example.com/orders目录。"
    "如果主库故障，系统会在30秒内切换到备库。"
    "切换后请检查订单号550e8400-e29b-41d4-a716-446655440000是否能正常查询。"
    "团队每周五下午会复盘上一周的故障。"
    "新员工入职后需要先阅读操作手册。"
    "机房的空调温度设定为22°C。"
    "食堂在二楼，午饭时间是十二点。"
)


def test_joining_chinese_sentences_never_runs_a_url_into_the_next() -> None:
    # found by the invariant property below: with the sentence between them dropped, a URL
    # followed by "……" ran into the next kept sentence ("……🙂" became part of the URL)
    from promptslim.backends.compress.extractive import join_units, split_units

    text = "文档在https://docs.example.cn/a?b=1……我们故障……🙂。下一步是检查日志。"
    units = split_units(text, find_protected_spans(text))
    keep = [True] * len(units)
    keep[1] = False  # 我们故障……
    assert units[1].of(text) == "我们故障……"
    out = join_units(text, units, keep)
    assert out == "文档在https://docs.example.cn/a?b=1…… 🙂。下一步是检查日志。"
    urls = [s.of(out) for s in find_protected_spans(out, kinds=("url",))]
    assert urls == ["https://docs.example.cn/a?b=1……"]
    # where nothing would fuse, Chinese sentences still join with no space
    assert join_units(text, units, [True, True, False, True]).endswith("我们故障……下一步是检查日志。")


def test_compress_keeps_whole_chinese_sentences_and_protected_spans() -> None:
    request = Request(
        messages=[Message(role="user", content="主库故障以后多久切换到备库？")],
        documents=[Document(id="ops", text=LONG_DOC)],
    )
    counter = get_counter()
    budget = count_document(request.documents[0], counter) // 2
    result = CompressStage(compressor="extractive").run(request, Budget(documents=budget))
    out = result.documents[0].text
    assert count_document(result.documents[0], counter) <= budget
    assert "如果主库故障，系统会在30秒内切换到备库。" in out  # the answer survives
    kept = sentences(out)
    assert kept and all(s in sentences(LONG_DOC) for s in kept)  # whole sentences only
    assert out == "".join(kept)  # no spaces inserted between Chinese sentences
    for span in find_protected_spans(LONG_DOC):
        value = span.of(LONG_DOC)
        if value[:4] in out:
            assert value in out  # a protected span is kept whole or dropped whole


def test_extractive_summary_keeps_whole_chinese_sentences() -> None:
    messages = [
        Message(role="user", content="你好！我们正在把订单服务从MySQL迁移到PostgreSQL。预算是每月3000元。"),
        Message(role="assistant", content="好的。我们决定在2026年12月5日完成切换，负责人是王磊。"),
        Message(role="user", content="谢谢！接口文档在https://docs.example.com/api里。回滚方案怎么做？"),
        Message(role="assistant", content="嗯。回滚方案是保留旧库只读两周。"),
    ]
    summary = ExtractiveSummariser().summarise(messages, max_tokens=70, counter=get_counter())
    lines = summary.splitlines()
    source = {f"{m.role}: {s}" for m in messages for s in sentences(m.text)}
    assert lines and all(line in source for line in lines)
    assert "assistant: 我们决定在2026年12月5日完成切换，负责人是王磊。" in lines
    assert not any(line.endswith(("你好！", "好的。", "谢谢！", "嗯。")) for line in lines)


# ---------------------------------------------------------------- bench metrics


def test_answer_metrics_on_chinese() -> None:
    from promptslim.bench.metrics import best_subspan_em, normalize_answer, token_f1

    assert normalize_answer("北京 市，（中国）ＡＢＣ１２３！") == "北京市中国abc123"
    assert best_subspan_em("它位于安春省。", ["安春"]) == 1.0
    # F1 over characters: "北京" against "答案是北京市" shares 2 of 6 and 2 of 2 characters
    assert token_f1("答案是北京市", ["北京"]) == pytest.approx(2 * (2 / 6) * 1.0 / (2 / 6 + 1.0))
    assert token_f1("the cat sat", ["cat"]) == pytest.approx(2 * (1 / 2) / (1 / 2 + 1))


# ---------------------------------------------------------------- retrieval


def qa_request(question: str, passages: list[str]) -> Request:
    return Request(
        messages=[Message(role="user", content=question)],
        documents=[Document(id=f"p{i}", text=p) for i, p in enumerate(passages)],
    )


def test_retrieval_falls_back_to_bm25_on_chinese_with_the_english_model() -> None:
    from promptslim.stages.retrieval import RetrievalStage

    result = RetrievalStage(max_k=3).run(qa_request("龙井茶的产地是哪里？", PASSAGES))  # hybrid
    stage = result.report.stages[0]
    assert any("BM25 only" in w and "multilingual" in w for w in stage.warnings)
    assert stage.details.get("language_fallback") == "bm25"
    assert result.documents[0].id == "p7"  # the tea passage, found by the Chinese analyser


def test_retrieval_keeps_a_multilingual_model_and_english_text_as_configured() -> None:
    from promptslim.stages.retrieval import RetrievalOptions
    from promptslim.stages.retrieval_scoring import english_model_on_foreign_text as english_on

    zh = "龙井茶的产地是哪里？"
    multilingual = RetrievalOptions.parse(model="/models/paraphrase-multilingual-MiniLM-L12-v2")
    assert not english_on(multilingual, zh, PASSAGES)
    assert english_on(RetrievalOptions.parse(model="/models/all-MiniLM-L6-v2"), zh, PASSAGES)
    assert not english_on(RetrievalOptions(), "Where is tea grown?", ["Tea grows in Hangzhou."])
    assert not english_on(RetrievalOptions.parse(scorer="bm25"), zh, PASSAGES)


def test_retrieval_dedupes_near_duplicate_chinese_documents() -> None:
    from promptslim.stages.retrieval import RetrievalStage

    twin = "（转载）" + PASSAGES[7]  # a syndicated copy: whole-clause "words" would differ
    request = qa_request("龙井茶的产地是哪里？", [*PASSAGES, twin])
    kept = {d.id for d in RetrievalStage(scorer="bm25", max_k=5).run(request).documents}
    assert len(kept & {"p7", f"p{len(PASSAGES)}"}) == 1  # one of the twins, not both


# ---------------------------------------------------------------- builtin:chat-zh


def test_builtin_chat_zh_loads_deterministically_and_slims() -> None:
    from promptslim.bench.datasets import load_dataset

    first = load_dataset("builtin:chat-zh", limit=5, seed=3)
    again = load_dataset("builtin:chat-zh", limit=5, seed=3)
    other = load_dataset("builtin:chat-zh", limit=5, seed=4)
    assert first.name == "builtin:chat-zh" and len(first.items) == 5 and not first.errors

    def dump(ds: Any) -> list[Any]:
        return [(i.id, i.request.model_dump(), i.answers, i.metadata) for i in ds.items]

    assert dump(first) == dump(again)  # same seed, same items
    assert dump(first) != dump(other)
    assert load_dataset("builtin:chat-zh", limit=2, seed=3).items[1] == first.items[1]  # item i is fixed

    for item in first.items:
        request = item.request
        date, weekday, time, request_id, _user = item.metadata["volatile"]
        system = request.messages[0].content or ""
        assert date in system and time in system and request_id in system
        assert "年" in date and "点" in time
        assert item.answers[0] in (request.messages[1].content or "")  # planted early ...
        assert request.messages[-1].role == "user" and "项目代码" in (request.messages[-1].content or "")
        assert any(m.tool_calls for m in request.messages) and any(m.role == "tool" for m in request.messages)

        # the prefix stage moves the Chinese date, weekday and time out of the system prompt
        prefixed = PrefixStage().run(request).request
        stable = prefixed.messages[0].content or ""
        assert date not in stable and weekday not in stable and time not in stable
        assert request_id not in stable  # its hex part is moved too
        context = "\n".join(m.text for m in prefixed.messages[1 : prefixed.prefix_end() + 1])
        for value in (date, weekday, time):
            assert value in context

        # ... and the history stage trims the turns but keeps the last user message as it came
        out = HistoryStage().run(request, Budget(history=120)).request
        assert out.messages[-1].to_openai() == request.messages[-1].to_openai()
        assert len(out.messages) < len(request.messages)
        calls = {c.id for m in out.messages for c in (m.tool_calls or ())}
        results = {m.tool_call_id for m in out.messages if m.role == "tool"}
        assert calls == results  # a tool call and its result stay or go together


# ---------------------------------------------------------------- invariants on generated Chinese requests
#
# The invariant suite (tests/test_invariants.py) draws mostly Latin text; these properties draw
# Chinese and mixed Chinese-English text with Chinese punctuation, full-width characters,
# numbers with Chinese units, URLs, UUIDs, code, JSON and Chinese dates and times, and run it
# through the full pipeline (prefix, history, retrieval with BM25, extractive compression).

_ZH_WORDS = [
    "我们", "数据库", "迁移", "服务器", "订单", "用户", "请", "检查", "会议", "项目", "代码", "北京",
    "上海", "备份", "故障", "切换", "文档", "问题", "回答", "模型", "缓存", "前缀", "压缩", "历史",
    "检索", "天气", "很好", "系统", "提示", "工具", "调用", "结果", "的", "了", "是", "在", "和",
    "负责人", "王磊", "预算", "每月", "回滚", "方案", "只读", "两周", "长城", "龙井茶", "杭州",
    "日本語です", "한국어", "今天", "明天", "以下3点", "每周一",
]
_ZH_PUNCT = ["。", "。", "。", "！", "？", "；", "，", "，", "、", "……", "：", "「好的。」", "“不行。”", "（备注）", "《手册》"]
_ZH_MIXED = [
    " PostgreSQL ", " the cache ", "API", " Python ", "GPT-4", "v1.2.3", "It works.", " OK! ",
    "ＰｏｓｔｇｒｅＳＱＬ", "１２３", "\u3000", "ｈｔｔｐ", "🙂", "e\u0301",
]
_ZH_SPECIALS = [
    "42", "3.14", "3,500元", "１２件", "15ms", "30秒", "2万", "22°C", "100%",
    "https://example.com/docs/安装", "https://docs.example.cn/a?b=1", "ops@example.com",
    "550e8400-e29b-41d4-a716-446655440000", "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "2026年11月30日", "12月1日", "二〇二六年十一月", "2026/11/30", "下午3点", "15点30分",
    "上午十点半", "星期一", "周五", "2026-11-30", "12:30",
    "`code`", '{"城市": "北京", "n": 1}', "```python\nprint('你好。')\n```",
]
_ZH_ODD = ["\n", "\n\n", " ", "\r\n", "\t", "\u200b", "\ufeff"]
_ZH_POOL = [*_ZH_WORDS, *_ZH_PUNCT, *_ZH_MIXED, *_ZH_SPECIALS, *_ZH_ODD]
assert len(_ZH_POOL) <= 256


@st.composite
def _zh_text(draw: st.DrawFn, *, max_words: int = 30, min_words: int = 0) -> str:
    raw = draw(st.binary(min_size=min_words, max_size=max_words))  # one byte, one token: cheap and shrinks well
    text = "".join(_ZH_POOL[b % len(_ZH_POOL)] for b in raw)
    if raw[:1] == b"\xff":  # now and then a long field, for compression and folding to bite
        text = (text + "。") * (10 + len(raw))
    if raw and raw[-1] % 2:
        text += "。"
    return text


@st.composite
def _zh_bodies(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        date = draw(st.sampled_from(["2026年11月30日", "2027年1月5日", "12月1日", "二〇二六年十一月三十日"]))
        time = draw(st.sampled_from(["下午3点", "上午9点15分", "晚上八点半", "15点30分"]))
        messages.append({"role": "system", "content": f"你是客服助手。今天是{date}，现在是{time}。" + draw(_zh_text(max_words=12))})
    elif draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_zh_text(max_words=12))})
    for n in range(draw(st.integers(0, 5))):
        if draw(st.integers(0, 3)) == 0:
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"q": draw(_zh_text(max_words=3))}, ensure_ascii=False)},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(_zh_text(max_words=15))})
        else:
            messages.append({"role": "user", "content": draw(_zh_text())})
            messages.append({"role": "assistant", "content": draw(_zh_text())})
    messages.append({"role": "user", "content": draw(_zh_text(max_words=12)) + "？"})
    documents = [  # long enough, often, for compression to cut sentences out of them
        {"id": f"d{i}", "text": draw(_zh_text(min_words=draw(st.sampled_from([0, 0, 120])), max_words=250))}
        for i in range(draw(st.integers(0, 4)))
    ]
    return {"model": "m", "messages": messages, "documents": documents}


_ZH_BUDGETS = st.sampled_from(
    [Budget(), Budget(total=80), Budget(total=300), Budget(total=1200, documents=150),
     Budget(total=600, history_share=0.2), Budget(history=80, documents=80)]
)
_ZH_EXAMPLES = int(os.environ.get("ZH_INVARIANT_EXAMPLES", "500"))  # ~10 s on a 2-core box


def _zh_pipeline() -> Pipeline:
    return Pipeline(
        [PrefixStage(), HistoryStage(), RetrievalStage(scorer="bm25"), CompressStage(compressor="extractive")]
    )


_ZH_A, _ZH_B = _zh_pipeline(), _zh_pipeline()
_SPACE = re.compile(r"\s+")


def _zh_run(pipeline: Pipeline, request: Request, budget: Budget) -> Result | BudgetInfeasible:
    try:
        return pipeline.run(request, budget)
    except BudgetInfeasible as exc:
        return exc


@settings(
    max_examples=_ZH_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=_zh_bodies(), budget=_ZH_BUDGETS)
def test_invariants_hold_on_chinese_and_mixed_requests(body: dict[str, Any], budget: Budget) -> None:
    request = Request.from_openai(body)
    first = _zh_run(_ZH_A, request, budget)
    second = _zh_run(_ZH_B, Request.from_openai(body), budget)

    # deterministic: the same bytes, or the same infeasibility, from a second pipeline
    if isinstance(first, BudgetInfeasible):
        assert isinstance(second, BudgetInfeasible)
        assert (first.minimum, first.budget) == (second.minimum, second.budget)
        assert first.budget is None or first.minimum > first.budget
        return
    assert not isinstance(second, BudgetInfeasible)
    assert json.dumps(first.to_openai(), sort_keys=True, ensure_ascii=False) == json.dumps(
        second.to_openai(), sort_keys=True, ensure_ascii=False
    )
    out = first.request

    # within budget
    if budget.total is not None:
        assert count_request(out, get_counter(request.tokenizer)) <= budget.total

    # the last user message unchanged, and still last
    i_in, i_out = request.last_user_index(), out.last_user_index()
    assert i_in is not None and i_out is not None
    assert out.messages[i_out].to_openai() == request.messages[i_in].to_openai()
    assert len(request.messages) - i_in == len(out.messages) - i_out

    # a tool call and its result together
    calls = {c.id for m in out.messages for c in (m.tool_calls or ())}
    results = {m.tool_call_id for m in out.messages if m.role == "tool"}
    assert calls == results

    # protected spans (UUIDs, URLs, numbers) in an output document appear verbatim in its input
    given_docs = {d.id: d for d in request.documents}
    for doc in out.documents:
        source = given_docs[doc.id].text
        for span in find_protected_spans(doc.text, kinds=("uuid", "url", "email", "number_unit")):
            if span.kind == "json":
                continue
            assert span.of(doc.text) in source, f"protected span {span.of(doc.text)!r} of {doc.id} altered"

    # every Chinese date or time in the system prompt (moved out of it or not) is in the output
    everything = _SPACE.sub("", "\n".join(m.text for m in out.messages))
    for m in request.messages[: request.prefix_end()]:
        for kind in ("zh_date", "zh_time"):
            for match in text_module.PATTERNS[kind].finditer(normalise_width(m.text)):
                value = _SPACE.sub("", m.text[match.start() : match.end()])
                assert value in everything, f"Chinese {kind} {value!r} of the system prompt lost"


# ---------------------------------------------------------------- README.zh-CN.md


def test_chinese_readme_keeps_the_english_readme_commands() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    english = (root / "README.md").read_text(encoding="utf-8")
    chinese = (root / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "README.zh-CN.md" in english.split("\n## ")[0]  # linked near the top
    fence = re.compile(r"```bash\n(.*?)```", re.DOTALL)
    assert fence.findall(english) and fence.findall(chinese) == fence.findall(english)
    # every command of the English command-line table is in the Chinese one, as written
    commands = re.findall(r"^\| `(promptslim [^`]+)` \|", english, re.MULTILINE)
    assert len(commands) >= 7
    for command in commands:
        assert f"`{command}`" in chinese, command
