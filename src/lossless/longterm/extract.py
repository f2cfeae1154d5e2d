"""Finding durable memories in a conversation: sentence-level rules (English and Chinese),
their importance (:mod:`lossless.core.importance` with a floor by kind), and the LLM path (a
JSON-array request through a Summarizer and the parser for its answer).

Precision over recall: a memory store full of "I'll check that" is worse than one that
misses a remark, so each rule needs an explicit cue, questions are skipped, and
preferences, personal facts, requests and requests to remember are taken only from what
the *user* said: a rule about "I"/"我" is about the speaker, and an assistant's "Sure, I'll
remember that." is neither a fact nor about the user. From the assistant come errors,
fixes, decisions, constraints and to-dos. Sentences are kept verbatim (clipped if very
long), never paraphrased.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lossless.core.importance import score as score_text
from lossless.core.render import message_text
from lossless.core.scripts import CJK_LETTERS
from lossless.core.types import Message
from lossless.longterm.records import DEFAULT_IMPORTANCE, KINDS, TASK_STATUSES
from lossless.summarize.base import SummaryItem, SummaryRequest

if TYPE_CHECKING:
    from lossless.core.tokens import TokenCounter
    from lossless.summarize.base import Summarizer

log = logging.getLogger("lossless")

__all__ = ["EXTRACTION_INSTRUCTION", "Candidate", "extract", "llm_candidates", "parse_llm_answer", "score"]

MAX_SENTENCE_CHARS = 400
# shorter sentences ("Done.", "好的。", "出错了。") carry nothing durable; four Chinese
# characters say as much as a short English sentence ("我叫李明", "我是医生")
_MIN_CHARS = 6
_MIN_CJK = 4
_TOOL_ERRORS_PER_MESSAGE = 3
_FIX_LOOKBACK = 6  # a fix pairs with an error said at most this many messages before it

EXTRACTION_INSTRUCTION = (
    "Extract the durable memories from the conversation below: decisions, the user's "
    "preferences, facts the user stated about themselves or their work, constraints and "
    "deadlines, errors with their fixes, and tasks with their status. Skip small talk and "
    "anything only true for the moment. Write each memory in the language the conversation "
    "is written in. Answer with one JSON array and nothing else, each "
    'element {"kind": "fact" | "preference" | "error" | "task" | "pattern", "content": '
    '"one self-contained sentence", "importance": 0.0-1.0, "source_message_ids": ["msg_…"]}.'
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory to be added, before it has an id."""

    kind: str
    content: str
    importance: float
    source_message_ids: tuple[str, ...]
    created_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] | None = None


# A letter or digit that is not Chinese, Japanese or Korean: an English cue word is whole
# where it has none beside it. ``\b`` counts CJK characters as word characters, so in
# mixed text ("这个API timeout了", "deadline是下周五") no English word was found.
_LATIN_EDGE = f"[^\\W{CJK_LETTERS}]"


def _rx(english: str, chinese: str = "") -> re.Pattern[str]:
    parts = [rf"(?<!{_LATIN_EDGE})(?:{english})(?!{_LATIN_EDGE})"] + ([f"(?:{chinese})"] if chinese else [])
    return re.compile("|".join(parts), re.IGNORECASE)


_ERROR = _rx(
    r"error|errors|exception|traceback|failed|failure|fails|crash(?:ed|es)?|panic|segfault|timed out|"
    r"timeout|\w+(?:Error|Exception)",
    "错误|报错|失败|异常|崩溃|出错|超时",
)
_FIX = _rx(
    r"fixed|the fix|fixed by|solved|resolved|workaround|the solution|the cause was|root cause|caused by",
    "修复|解决了|解决方法|原因是|根因|改成|办法是",
)
_REMEMBER = _rx(
    r"remember|don't forget|do not forget|note that|keep in mind|for future reference",
    "记住|别忘|不要忘|请注意|备忘",
)
_DECISION = _rx(
    r"we decided|we've decided|i decided|decided to|decision is|we(?:'ll| will) go with|let's go with|"
    r"we chose|we picked|we agreed|agreed to|settled on|going with",
    "决定|选择了|选定|方案是|采用|确定用|定了|商定",
)
_PREFERENCE = _rx(
    r"i (?:really )?(?:prefer|like|love|enjoy|hate|dislike)|i'd rather|i would rather|"
    r"i (?:don't|do not) (?:like|want|eat|drink)|my favou?rite|please (?:always|never|don't|do not)",
    "喜欢|偏好|更喜欢|不喜欢|讨厌|习惯用|请总是|请不要|请别|我不吃|我不喝",
)
# A first-person "I'll remember" / "我记住了" is an acknowledgement, not a request to remember
# ("帮我记住…" and "I want you to remember…" are requests, so they are not matched here).
_SELF_REMEMBER = re.compile(
    r"\b(?:i|we)(?:'ll|'ve|'d| will| would| shall| have| do| did| don't| do not| can't| cannot| won't| will not|"
    r" always| definitely| certainly| surely| never| now| also)*\s+remember\b|"
    r"(?<![帮给替让叫请])我们?(?:会|已经|都|也|一定|肯定|牢牢|已)*记住",
    re.IGNORECASE,
)
# The Chinese personal facts: a name or surname, an occupation, a workplace, a home, family
# and pets named, an allergy or a lasting illness. Chit-chat starts the same way ("我是开玩笑的",
# "我是说…", "我叫了外卖", "我的天…", "我在想要不要去上班", "我住院了", "我有个问题"), so each
# cue wants the shape of a fact: a short noun phrase that ends the clause, not a verb, an
# aspect particle or a trailing 的/了/吧.
_CLAUSE_END = r"(?=$|[\s，。！？、；：,.!?;:])"
_NOT_PARTICLE = r"(?<![的了吧呢啊吗呀啦嘛])"  # 我是开玩笑的 / 我的咖啡是冷的: a state, not a fact
_CJK_NAME = r"(?:(?![了过着的吧呢啊吗呀])[\u4e00-\u9fff]){1,4}|[A-Za-z][A-Za-z .'-]{0,30}"
# a name is followed by the clause's end or by anything not a word: "我叫李明～", "我叫李明…",
# "我叫李明😄", "我叫李明（木子李）" are names as much as "我叫李明。"
_NAME_END = r"(?=$|[^\w])"
# 叫 is also "call for" and "tell to": 我叫车, 我叫醒你, 我叫他过来, 我叫外卖 name no one
_NOT_A_NAME = r"(?!车|醒|外卖|快递|出租|滴滴|他|她|你|您|它|我|人|大家|不|没)"
# … and the cry of an animal: 我家狗叫个不停, 我的猫叫得很大声
_NOT_A_CRY = r"(?!个|声|得|起|了|着|过|什么|啥|谁|哪)"  # and 我妈叫什么来着 asks
# what follows 是 in a one-off remark or a question said as a statement, not a role:
# 我是说…, 我是第一次来, 我是今天才知道, 我是支持你, 我的问题是怎么部署, 我妈是不是…
_NOT_A_ROLE_ZH = (r"(?!说|想|觉得|问|在|不|真|很|太|挺|好|指|要|来|去|被|因为|为了|开玩笑|故意|随便|"
                  r"你|您|他|她|第[一二三四五六七八九十\d]+[次回]|头一[次回]|首次|初次|刚|才|"
                  r"今天|昨天|明天|现在|从|怕|担心|支持|同意|反对|"
                  r"怎么|怎样|如何|为什么|为啥|什么|啥|哪|谁|多少|几|是否|能否|能不能|可不可以|要不要)")
_VALUE = r"[^\s，。！？、；：,.!?;:]{1,30}"
# what "我的…是" says that is no fact about the user (the English rule's point, question, idea …)
_NOT_A_THING_ZH = (r"(?!天|意思|妈呀|问题|疑问|想法|看法|意见|建议|猜测|理解|感觉|印象|观点|回答|答案|重点|"
                   r"目的|担心|顾虑)")
# family and pets said without 的 (我女儿叫小红, 我妈是老师): only these nouns, since "我X是…"
# is any sentence at all ("我觉得是…", "我也是…")
_KIN = (r"(?:女儿|儿子|孩子|闺女|宝宝|爸妈|父母|妈妈|妈|母亲|爸爸|爸|父亲|老婆|老公|妻子|丈夫|太太|媳妇|"
        r"爱人|对象|男朋友|女朋友|男友|女友|哥哥|哥|姐姐|姐|弟弟|弟|妹妹|妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|"
        r"猫咪|猫|狗狗|狗)")
# a surname is one or two characters (李, 欧阳), then the clause's end or the given name: 我姓王，叫王强
_SURNAME = (r"我姓(?!名)(?:(?:(?![了过着的吧呢啊吗呀什么啥])[\u4e00-\u9fff]){1,2}|[A-Za-z][A-Za-z'-]{0,20})"
            r"(?=$|[^\w]|叫|名)")
# a place, said without 在: 我住杭州 (not 我住院了, 我住酒店, 我住三天, 我住哪, 我住不惯, 我住北京的时候)
_STAY = (r"(?![^，。！？,.!?]*(?:(?:酒店|宾馆|旅馆|民宿|青旅|客栈|招待所|医院|病房)(?!附近|旁边|对面|隔壁|边上)|"
         r"[一二两三四五六七八九十几\d]+(?:天|晚|夜|周)))")  # 我住在医院附近 is a home
_PLACE = (rf"(?!院|了|过|着|得|不|下|进|哪|什么|啥|这|那){_STAY}"
          rf"(?:(?!的)[^\s，。！？、；：,.!?;:]){{1,12}}{_NOT_PARTICLE}")
# a lasting illness (I have diabetes): a named one, or a name ending 病/症/炎/癌 that is not a
# way of speaking (我有毛病, 我有职业病, 我有懒癌) nor someone else's (我有个朋友有糖尿病, 我有朋友得了癌症)
_ILLNESS_ZH = (r"(?!毛病|通病|职业病|语病|懒癌|直男癌|公主病|王子病|中二病|富贵病)"
               r"(?:哮喘|高血压|低血压|高血糖|低血糖|高血脂|痛风|贫血|癫痫|近视|色盲|偏头痛|乳糖不耐受?|"
               r"(?:(?![的了有得和跟说怕个点些])[\u4e00-\u9fff]){1,6}?(?:病|症|炎|癌))")
_CHINESE_PERSONAL = "|".join((
    rf"我叫{_NOT_A_NAME}(?:{_CJK_NAME}){_NAME_END}",
    "我的名字",
    _SURNAME,
    # an occupation or an origin: 我是医生, 我是一名老师, 我是北京人
    rf"(?<!如果)(?<!假如)(?<!要是)我是(?:一名|一个|一位|个|名)?{_NOT_A_ROLE_ZH}"
    rf"[^\s，。！？、；：,.!?;:]{{1,10}}{_NOT_PARTICLE}{_CLAUSE_END}",
    # a workplace and a home, said with 现在/目前/一直 as often as without ("我现在住在杭州")
    r"我(?:现在|目前|一直)?在(?!想|考虑|犹豫|纠结|准备|打算|找|去|路上)[^\s，。！？、；：,.!?;:要想去不找]{1,12}"
    r"(?:工作|上班|上学|读书|长大)",
    # a home, not a stay: 我住在酒店里两天 is not where the user lives; 我家住在北京 is
    rf"我(?:家|现在|目前|一直)?住在{_STAY}",
    rf"我(?:家|现在|目前|一直)?住{_PLACE}{_CLAUSE_END}",
    # where the user comes from: 我老家在成都, 我的家乡是杭州, 我老家是成都的
    r"我的?(?:老家|家乡|故乡)(?:在|是)(?!哪|什么|啥)(?:(?![的了吧呢啊吗呀啦嘛])[^\s，。！？、；：,.!?;:]){1,12}的?"
    + _CLAUSE_END,
    # family, pets and things of the user's, named or described: 我的妻子是护士, 我家猫叫咪咪, 我女儿叫小红
    rf"我(?:(?:的|家的?){_NOT_A_THING_ZH}[^\s，。！？、；：,.!?;:]{{1,8}}?|{_KIN}(?:的?名字)?)"
    rf"(?:是{_NOT_A_ROLE_ZH}|叫{_NOT_A_NAME}{_NOT_A_CRY}(?!真|很|太|挺|好|在|被|说|想|觉得)){_VALUE}"
    rf"{_NOT_PARTICLE}{_CLAUSE_END}",
    r"我对.{1,10}过敏",
    rf"我(?:也|还|一直|从小就?)?(?:有|患有){_ILLNESS_ZH}{_CLAUSE_END}",
))
# The English ones want a fact's shape too: "I'm a bit tired", "call me when you're home",
# "my point is…", "my code is broken again", "I live in hope" start the same way.
_NOT_A_ROLE = (r"(?!(?:bit|little|tad|lot|few|couple|while|sec|second|minute|moment|mess|wreck|total|complete|"
               r"first[- ]?tim\w*)\b)")  # "I'm a first-time visitor" is 我是第一次来: a one-off remark
_NOT_CALLED = (r"(?!(?:when|if|back|later|tomorrow|tonight|anytime|any|now|again|soon|sometime|after|before|"
               r"at|on|in|once|as|crazy|maybe|please|asap|first|whenever|and|or|but|too|so)\b)")
_TRANSIENT = r"(?![^.!?]*\b(?:today|tonight|right now|at the moment|again|this (?:morning|afternoon|evening|week))\b)"
_NOT_A_THING = (r"(?!(?:point|question|guess|concern|issue|problem|idea|thoughts?|understanding|bet|answer|"
                r"worry|fear|hope|feeling|sense|impression|take|opinion|suggestion|reply|response|mistake|"
                r"bad|head|mind|heart|code|internet|connection|computer|laptop|screen|battery|build|output|"
                r"tests?|apologies|pleasure)\b)")
# a lasting illness, named: a cold, a headache or "a migraine" pass, "I have no disease" is none
_ILLNESS_EN = (r"(?!(?:no|not|any|never)\b)(?:(?:type [12] )?diabetes|asthma|(?:high|low) blood (?:pressure|sugar)|"
               r"hypertension|epilepsy|migraines|gout|ana?emia|arthritis|eczema|psoriasis|adhd|depression|"
               r"(?:an? )?(?:\w+ ){0,2}(?:allergy|intolerance)|"
               r"(?:\w+(?:['’]s)? ){1,2}(?:disease|syndrome|disorder))\b")
_PERSONAL = _rx(
    rf"my name is|call me {_NOT_CALLED}\w+|(?:i am|i'm) an? {_NOT_A_ROLE}\w+|i work (?:at|as|for)|"
    rf"i work on (?!(?:it|this|that|them|these|those)\b)\w+|i live in (?!(?:hope|fear|denial|the past|the moment)\b)\w+|"
    rf"i grew up in \w+|(?:i am|i'm) from (?-i:[A-Z])\w+|"
    rf"my {_NOT_A_THING}\w+(?: \w+)? (?:is|are|works|lives){_TRANSIENT}|(?:i am|i'm) allergic|"
    # a relative's or a pet's name ("my daughter's name is Lily"), not any "my X's Y is"
    # ("my sister's friend is moving to Bergen apparently" is hearsay)
    rf"my \w+['’]s (?:first |last |full |nick)?name is|"
    rf"i(?: also| still)?(?: have|'ve)(?: got)? {_ILLNESS_EN}{_TRANSIENT}|"
    rf"i(?: also| still)? (?:suffer from|live with|(?:was|'ve been|have been) diagnosed with) {_ILLNESS_EN}|"
    rf"(?:i am|i'm) (?:diabetic|asthmatic|epileptic|ana?emic|lactose intolerant|colou?r ?blind)\b",
    _CHINESE_PERSONAL,
)
_CONSTRAINT = _rx(
    r"must|mustn't|must not|required to|requirement|deadline|due (?:by|on)|no later than|"
    r"not allowed|forbidden|at the latest",
    "必须|务必|不得|禁止|截止|最晚|要求|永远不要|绝对不要|千万不要|千万别",
)
_TASK_ANY = _rx(r"todo|to-do|action item|next step|next steps|task", "待办|任务|下一步")
_TASK_USER = _rx(r"need to|needs to|we should|please make sure", "需要|要做|计划")
_STATUS = (
    ("completed", _rx(r"done|completed|finished|shipped|merged|deployed", "已完成|完成了|搞定|做完")),
    ("failed", _rx(r"failed|abandoned", "失败")),
    ("blocked", _rx(r"blocked|stuck", "阻塞|卡住")),
    ("in_progress", _rx(r"working on|in progress|started|underway", "进行中|正在")),
)
_SHORT_FACT = re.compile(_SURNAME)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
# a question mark, or (chat often leaves it out) a sentence-final 吗: "你喜欢喝咖啡吗"
_QUESTION = re.compile(r"[?？]\s*$|吗[\s。.!！~～…]*$")
_WORDS = re.compile(r"[\u3400-\u9fff]|[^\W_]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# Base importance by what a rule found; the kind's default covers the rest.
_CATEGORY_IMPORTANCE = {
    "remember": 0.85,
    "error_fix": 0.85,
    "decision": 0.7,
    "constraint": 0.65,
    "personal": 0.6,
    "fix": 0.6,
}


def score(kind: str, category: str | None = None, role: str | None = None, text: str = "") -> tuple[float, list[str]]:
    """The importance of an extracted item and the reasons for it.

    The larger of two views: the message scorer's (:mod:`lossless.core.importance`, which
    weighs errors, decisions, constraints, memory requests, identifiers) and a floor by
    what the rule found, a little higher when the user said it. The floor matters for
    what the message scorer does not look for: "My name is Maya." is a short message to
    it, and the most durable kind of memory there is."""
    floor = _CATEGORY_IMPORTANCE.get(category or "", DEFAULT_IMPORTANCE.get(kind, 0.5))
    if role == "user":
        floor += 0.05
    value, reasons = floor, [category or kind]
    if text:
        shared = score_text(text, role=role, is_tool_result=role == "tool")
        value = max(value, shared.value)
        reasons += [r.label for r in shared.reasons if r.weight > 0 and r.label not in reasons]
    return round(max(0.0, min(1.0, value)), 4), reasons


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SENTENCE_CHARS else text[: MAX_SENTENCE_CHARS - 1] + "…"


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if s and s.strip())
    return out


def _too_short(sentence: str) -> bool:
    # "我姓李" is three characters and the most durable kind of fact
    return len(sentence) < _MIN_CHARS and len(_CJK.findall(sentence)) < _MIN_CJK and not _SHORT_FACT.match(sentence)


def _status(sentence: str) -> str:
    for status, rx in _STATUS:
        if rx.search(sentence):
            return status
    return "pending"


def _classify(sentence: str, role: str) -> tuple[str, str] | None:
    """(kind, category) of a sentence, or None. One rule per sentence, in this order."""
    user = role == "user"
    # only the user asks for something to be remembered: an assistant's "I'll remember
    # that" is its acknowledgement, and its text is not a fact about the user
    asks_to_remember = user and bool(_REMEMBER.search(_SELF_REMEMBER.sub(" ", sentence)))
    rules: list[tuple[bool, re.Pattern[str], str, str]] = [
        (True, _ERROR, "error", "error"),
        (asks_to_remember, _REMEMBER, "fact", "remember"),
        (True, _DECISION, "fact", "decision"),
        (user, _PREFERENCE, "preference", "preference"),
        (True, _TASK_ANY, "task", "task"),
        (user, _TASK_USER, "task", "task"),
        (True, _CONSTRAINT, "fact", "constraint"),
        (user, _PERSONAL, "fact", "personal"),
        (True, _FIX, "fact", "fix"),
    ]
    for allowed, rx, kind, category in rules:
        if allowed and rx.search(sentence):
            return kind, category
    return None


def _similar(a: str, b: str) -> bool:
    """Most words (or, for CJK, characters) in common: Jaccard >= 0.5."""
    wa, wb = set(_WORDS.findall(a.casefold())), set(_WORDS.findall(b.casefold()))
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= 0.5


@dataclass(slots=True)
class _Pending:
    kind: str
    category: str
    content: str
    role: str
    ids: list[str]
    created_at: datetime
    index: int  # message position, for pairing a fix with a recent error
    task_status: str | None = None


def extract(messages: Sequence[Message]) -> list[Candidate]:
    """Durable items in ``messages`` by rule, each with the ids of the messages it came
    from. An error followed within a few messages by its fix becomes one error record."""
    found: list[_Pending] = []
    open_error: _Pending | None = None
    for index, msg in enumerate(messages):
        if msg.role == "system":
            continue
        text = message_text(msg)
        if msg.role == "tool":
            # tool output is long and noisy: only its error lines are worth keeping
            lines = [ln.strip() for ln in text.splitlines() if _ERROR.search(ln)]
            for line in lines[:_TOOL_ERRORS_PER_MESSAGE]:
                item = _Pending("error", "error", _clip(line), msg.role, [msg.id], msg.created_at, index)
                found.append(item)
                open_error = item
            continue
        for sentence in _sentences(text):
            if _too_short(sentence) or _QUESTION.search(sentence):
                continue
            if (open_error is not None and index - open_error.index <= _FIX_LOOKBACK
                    and _FIX.search(sentence) and index > open_error.index):
                open_error.content = _clip(f"{open_error.content} — fix: {sentence}")
                open_error.category = "error_fix"
                if msg.id not in open_error.ids:
                    open_error.ids.append(msg.id)
                open_error.created_at = max(open_error.created_at, msg.created_at)
                open_error = None
                continue
            hit = _classify(sentence, msg.role)
            if hit is None:
                continue
            kind, category = hit
            item = _Pending(kind, category, _clip(sentence), msg.role, [msg.id], msg.created_at, index)
            if kind == "task":
                item.task_status = _status(sentence)
            if kind == "error":
                if open_error is not None and index - open_error.index <= _FIX_LOOKBACK \
                        and _similar(open_error.content, sentence):
                    # the same failure told again (a tool's error, then the assistant's account)
                    if msg.id not in open_error.ids:
                        open_error.ids.append(msg.id)
                    continue
                open_error = item
            found.append(item)
    out: list[Candidate] = []
    seen: set[str] = set()
    for item in found:
        key = item.content.casefold()
        if key in seen:
            continue
        seen.add(key)
        importance, reasons = score(item.kind, item.category, item.role, item.content)
        out.append(Candidate(
            kind=item.kind, content=item.content, importance=importance,
            source_message_ids=tuple(item.ids), created_at=item.created_at,
            metadata={"extracted": "rules", "category": item.category, "reasons": reasons},
            task={"status": item.task_status} if item.kind == "task" else None,
        ))
    return out


def _json_array(text: str) -> Any:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else stripped
    try:
        return json.loads(stripped)
    except ValueError:
        start, end = stripped.find("["), stripped.rfind("]")
        if start < 0 or end <= start:
            return None
        try:
            return json.loads(stripped[start : end + 1])
        except ValueError:
            return None


def parse_llm_answer(text: str, messages: Sequence[Message]) -> list[Candidate] | None:
    """The candidates in an LLM's JSON answer, or None if it holds no usable array.
    Elements that are not valid memories are skipped; ids not among ``messages`` are
    dropped, and an element naming none is credited to all of them."""
    data = _json_array(text)
    if not isinstance(data, list):
        return None
    known = [m.id for m in messages]
    latest = max((m.created_at for m in messages), default=None)
    out: list[Candidate] = []
    for element in data:
        if not isinstance(element, dict):
            continue
        kind, content, importance = element.get("kind"), element.get("content"), element.get("importance")
        if kind not in KINDS or not isinstance(content, str) or not content.strip():
            continue
        if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0 <= importance <= 1:
            importance = DEFAULT_IMPORTANCE[kind]
        given = element.get("source_message_ids")
        ids = tuple(i for i in given if i in known) if isinstance(given, list) else ()
        status = element.get("status")
        task = {"status": status if status in TASK_STATUSES else "pending"} if kind == "task" else None
        out.append(Candidate(kind=kind, content=_clip(content), importance=float(importance),
                             source_message_ids=ids or tuple(known), created_at=latest,
                             metadata={"extracted": "llm"}, task=task))
    return out or None


def ask(summarizer: Summarizer, instruction: str, messages: Sequence[Message], target_tokens: int,
        counter: TokenCounter, conversation_id: str, what: str) -> str | None:
    """The summarizer's answer to ``instruction`` over ``messages``, or None when it failed
    (logged as ``what``). The Summarizer protocol has no instruction field, so the
    instruction travels as the first item, a system message; the messages follow as they are."""
    first = messages[0]
    head = SummaryItem(kind="message", ref="instruction", text=instruction, first_seq=first.seq, last_seq=first.seq,
                       created_at=first.created_at, latest_at=first.created_at, role="system")
    items = tuple(SummaryItem(kind="message", ref=m.id, text=m.text, first_seq=m.seq, last_seq=m.seq,
                              created_at=m.created_at, latest_at=m.created_at, role=m.role, name=m.name)
                  for m in messages)
    request = SummaryRequest(items=(head, *items), depth=0, target_tokens=target_tokens, counter=counter,
                             conversation_id=conversation_id)
    try:
        return summarizer.summarize(request).text
    except Exception as exc:
        log.warning("lossless: %s by %s failed (%s); using the rules", what, summarizer.name, exc)
        return None


def llm_candidates(messages: Sequence[Message], summarizer: Summarizer, counter: TokenCounter,
                   conversation_id: str = "") -> list[Candidate] | None:
    """Ask ``summarizer`` for the memories in ``messages`` as a JSON array; None when it
    fails or answers with nothing usable (the caller falls back to :func:`extract`)."""
    if not messages:
        return None
    text = ask(summarizer, EXTRACTION_INSTRUCTION, messages, 1000, counter, conversation_id, "memory extraction")
    if text is None:
        return None
    found = parse_llm_answer(text, messages)
    if found is None:
        log.info("lossless: %s gave no JSON array of memories; using the rules", summarizer.name)
        return None
    return [replace(c, metadata={**c.metadata, "summarizer": summarizer.name}) for c in found]
