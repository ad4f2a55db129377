"""``builtin:chat`` and ``builtin:chat-zh``: generated multi-turn support chats, in English
and Chinese: a system prompt with volatile values and a tool definition, a fact planted early,
a tool call and its result, filler turns, and a last question about the fact."""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Callable
from typing import Any

from ..types import Message, Request
from .dataset_base import BenchItem
from .gen_rag import FILLER, random_name, random_person, zh_random_name, zh_random_person

__all__ = ["chat_item", "chat_zh_item"]


# ---------------------------------------------------------------- shared turns


def _tool_exchange(index: int, arguments: str, result: str, ack: str) -> list[Message]:
    """The assistant's ``get_ticket`` call, the tool's result, and the assistant's reply."""
    call = {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": "get_ticket", "arguments": arguments},
    }
    return [
        Message.model_validate({"role": "assistant", "content": None, "tool_calls": [call]}),
        Message(role="tool", tool_call_id=f"call_{index}", content=result),
        Message(role="assistant", content=ack),
    ]


def _filler_turns(
    rng: random.Random,
    n: int,
    *,
    topic: Callable[[random.Random], str],
    ask: str,
    answer: str,
    filler: tuple[str, ...],
) -> list[Message]:
    """``n`` user/assistant pairs about other topics (``{other}``), each ending in a filler
    sentence (``{filler}``); the generator is drawn from in the order the text reads."""
    out: list[Message] = []
    for _ in range(n):
        other = topic(rng)
        out.append(Message(role="user", content=ask.format(other=other, filler=rng.choice(filler))))
        out.append(
            Message(role="assistant", content=answer.format(other=other, filler=rng.choice(filler)))
        )
    return out


def _ticket_tool(description: str, properties: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": "get_ticket",
                "description": description,
                "parameters": {"type": "object", "properties": properties},
            },
        }
    ]


# ---------------------------------------------------------------- builtin:chat


def chat_item(rng: random.Random, index: int, *, n_filler_turns: int) -> BenchItem:
    """A support chat: a system prompt with volatile values (date, request id, user name) and a
    tool definition; a fact planted in the first user turn; a tool call and its result; filler
    turns; the last user turn asks for the planted fact."""
    user = random_person(rng)
    date = f"20{rng.randint(24, 27)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    request_id = f"req-{rng.getrandbits(48):012x}"
    code = f"{random_name(rng, 2).upper()}-{rng.randint(100, 999)}"
    system = (
        "You are a concise support assistant for an internal project tracker. "
        "Answer from the conversation; if a value was given earlier, repeat it exactly.\n"
        f"Current date: {date}\nRequest id: {request_id}\nUser: {user}"
    )
    topic = random_name(rng, 2)
    ticket = rng.randint(1000, 9999)
    status = rng.choice(["open", "blocked", "in review"])
    result = json.dumps({"status": status, "owner": random_person(rng)})
    messages = [
        Message(role="system", content=system),
        Message(
            role="user",
            content=f"Hi, I am setting up the {topic} project. Its project code is {code}. "
            "Please remember it.",
        ),
        Message(role="assistant", content=f"Noted: the {topic} project has the code {code}."),
        Message(role="user", content=f"Can you check the status of ticket {ticket}?"),
        *_tool_exchange(
            index,
            json.dumps({"project": topic}),
            result,
            "The ticket is tracked; details are in the tool result above.",
        ),
        *_filler_turns(
            rng,
            n_filler_turns,
            topic=lambda r: random_name(r, 2),
            ask="What should I write in the summary for the {other} milestone? {filler}",
            answer="Describe what the {other} milestone delivered, who reviewed it, and what is "
            "left. {filler}",
            filler=FILLER,
        ),
        Message(role="user", content=f"What is the project code of the {topic} project?"),
    ]
    tools = _ticket_tool("Look up a ticket in the tracker.", {"project": {"type": "string"}})
    return BenchItem(
        f"chat-{index}",
        Request(messages=messages, tools=tools),
        (code,),
        {"volatile": [date, request_id, user]},
    )


# ---------------------------------------------------------------- builtin:chat-zh

_ZH_WEEKDAYS = "一二三四五六日"
_ZH_PERIODS = ("上午", "下午", "晚上")
_ZH_CHAT_FILLER = (
    "这个问题之前在周会上讨论过。",
    "相关的记录都在项目文档里。",
    "评审意见已经整理好了。",
    "不过还需要再确认一下细节。",
    "大家对这个安排没有异议。",
)


def _zh_volatile(rng: random.Random) -> tuple[str, str, str]:
    """A Chinese date (2026年11月30日), its own weekday (星期一) and a time (下午3点半)."""
    day = datetime.date(2000 + rng.randint(24, 27), rng.randint(1, 12), rng.randint(1, 28))
    date = f"{day.year}年{day.month}月{day.day}日"
    weekday = "星期" + _ZH_WEEKDAYS[day.weekday()]
    hour = rng.randint(1, 11)
    time = f"{rng.choice(_ZH_PERIODS)}{hour}点" + rng.choice(["", f"{rng.randint(10, 59)}分", "半"])
    return date, weekday, time


def chat_zh_item(rng: random.Random, index: int, *, n_filler_turns: int) -> BenchItem:
    """``builtin:chat-zh``: as ``chat_item``, in Chinese: a system prompt with volatile values
    (a Chinese date such as 2026年11月30日, a weekday, a time such as 下午3点, a request id, a
    user name) and a tool definition; a project code planted in the first user turn; a tool
    call and its result; filler turns; the last user turn asks for the code. Deterministic."""
    user = zh_random_person(rng)
    date, weekday, time = _zh_volatile(rng)
    request_id = f"req-{rng.getrandbits(48):012x}"
    code = f"{random_name(rng, 2).upper()}-{rng.randint(100, 999)}"
    system = (
        "你是一个内部项目管理系统的客服助手，回答要简洁。"
        "请根据对话内容回答；如果前面给出过某个值，请原样复述。\n"
        f"当前日期：{date}（{weekday}）\n当前时间：{time}\n请求编号：{request_id}\n用户：{user}"
    )
    topic = zh_random_name(rng, 2)
    ticket = rng.randint(1000, 9999)
    status = rng.choice(["处理中", "已阻塞", "评审中"])
    result = json.dumps({"status": status, "owner": zh_random_person(rng)}, ensure_ascii=False)
    messages = [
        Message(role="system", content=system),
        Message(
            role="user", content=f"你好，我正在创建{topic}项目。它的项目代码是{code}，请记住。"
        ),
        Message(role="assistant", content=f"好的，已记下：{topic}项目的代码是{code}。"),
        Message(role="user", content=f"能帮我查一下工单{ticket}的状态吗？"),
        *_tool_exchange(
            index,
            json.dumps({"project": topic, "ticket": ticket}, ensure_ascii=False),
            result,
            "工单已经在跟踪中，详细信息见上面的工具结果。",
        ),
        *_filler_turns(
            rng,
            n_filler_turns,
            topic=lambda r: zh_random_name(r, 2),
            ask="{other}里程碑的总结应该写些什么？{filler}",
            answer="写清楚{other}里程碑交付了什么、由谁评审、还剩下哪些工作。{filler}",
            filler=_ZH_CHAT_FILLER,
        ),
        Message(role="user", content=f"{topic}项目的项目代码是什么？"),
    ]
    properties = {"project": {"type": "string"}, "ticket": {"type": "integer"}}
    tools = _ticket_tool("在项目管理系统中查询工单。", properties)
    return BenchItem(
        f"chat-zh-{index}",
        Request(messages=messages, tools=tools),
        (code,),
        {"volatile": [date, weekday, time, request_id, user]},
    )
