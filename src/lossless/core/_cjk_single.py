"""The CJK characters that cl100k_base encodes as one token each (generated from the
tokenizer's published ranks; ``tests/test_tokens.py`` checks each is one token).

The estimating counter charges these 1 token and every other CJK character its UTF-8
byte length, the byte-level worst case; the common characters of everyday Chinese,
Japanese and Korean text are in this set, so the estimate stays close on real text and
never falls below the tokenizer on rare characters."""

from __future__ import annotations

SINGLE_TOKEN_CJK = frozenset(
    "あいうえおかがきくけこごさざしじすせそただちっつてでとどなにのはばまみめもやよらりるれろわをんアィイウェエオカキクグコサ"
    "シジスズセタダチッテデトドナニバパビピフブプペポマムメャュョラリルレロン・ー一万三上下不与专业东两个中串为主么义之也书了"
    "事二于五些交产享京人亿今介从他付代以们件价任份企优会传但位体何余作你使例供価保信修倍值停像元先入全公共关其具内円册再写出"
    "击分列则初利别到制前力功加务动動包化北区十午华单南即历原去县参及友反发取变口只可台右号司合同名后向否含听启告员周命和品哈"
    "商問器四回因国图土在地场址型城基報場填增声处备复外多大天失头女好如始子字存学安宋完定实审客家容密对导将小少尔就局展山岁州"
    "工左已市布常平年并广序库应店度建开异式引张当录形影径待後得微心必志态思性总息您情意感成我或户所手打找技投报拉持指按换据排"
    "接推提播支收改放政效数整文料断新方族无日时明易星是時景更最月有服期木未本机权束条来板构析果查标样核格案检模次款止正此步歳"
    "段每比民気水求江汽没治法注活流海消清游源火点無然片版物特率环现球理生用由电男画界番登的监目直相省看県真知码确示社票私种科"
    "秒称移程稍税稿空立站章端笑符第等签简算管箱米类系素索约级线组经结给络统编网置美老考者而联能自至色节英藏行表装西要見见规视"
    "角解言計記話読计认议记论设证评试话询该详语误说请读调象责败账货购费资起超路身车转软载辑输达过运近还这进连述退送选通速造連"
    "道邮部都配释里重量金钟钮链销错键长開間関门闭问间队阳陆限院除雅集雷需非面音页项预频题额首验高黑가간값개거게결경고공과구그"
    "글기나내는능니다당대도동되된드든들디라래러력로록료류른를름리만메면명목문미버번보복부분비사산상색생서성세션소수스습시식신"
    "아야어에여열오와요용우운원위으은을음의이인일임입자작장재적전정제져조주지진째체출치크태터턴트튼하한할함해호화환회"
)

