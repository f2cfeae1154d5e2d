"""A second retention dev set, of another shape than BEAM: two named people chatting over
months in short casual turns, generated from a seed.

Each conversation is a different pair of people (names drawn from the seed) talking in
sessions (one date each, a timestamp on every message), mostly small talk, with facts
planted among it and ~20 questions about them, each with the ids of its evidence messages
and a category:

  single_hop      one message: a relative's job, city, pet, a possession, a number with a
                  unit ("5km", "3 kg"), a mixed CJK/Latin detail
  temporal        a fact that changes later; the answer is the latest value (evidence: both)
  date            when something happened or will; the answer is a date, written in the
                  chat as "on 14 May", "2023-05-14", "May 14th", "14 May 2023" …
  multi_hop       two messages from different sessions (where a relative lives, then what
                  they do): "What does the person who lives in Porto do?"
  open_inference  a habit mentioned in several sessions: "Would X enjoy a national park
                  trip?"; the reference is the habit's words taken from the evidence

Tokenization traps are planted on purpose: possessives with ' and ’ in messages and
questions, hyphenated words (sister-in-law, sous-chef, part-time), numbers glued to units,
a few CJK/Latin messages. Distractor small talk reuses the facts' vocabulary (relatives,
cities, jobs, pets) without asserting anything, so retrieval is not trivial.

A conversation comes out as ``beam.BeamChat`` (questions' ``ability`` is the category), so
``bench/retention.py --set chitchat`` runs on it as on BEAM; ``write()`` saves the set in
BEAM's file shape (plus ``name`` and ``created_at`` on each message) for ``beam.load_chat``:

    python bench/chitchat.py --seed 19 --out /tmp/chitchat   # then inspect the JSON

The same seed gives the same set, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import beam

__all__ = ["CATEGORIES", "DEFAULT_CONVERSATIONS", "DEFAULT_SEED", "generate", "generate_chat", "turn_rows", "write"]

DEFAULT_SEED = 19
DEFAULT_CONVERSATIONS = 10
CATEGORIES = ("single_hop", "temporal", "date", "multi_hop", "open_inference")
# questions per category in each conversation (20 in all)
QUOTA = {"single_hop": 6, "temporal": 4, "date": 4, "multi_hop": 3, "open_inference": 3}

NAMES = ["Caroline", "Melanie", "Joanna", "Nate", "Priya", "Tomás", "Aiko", "Darius", "Fatima", "Lukas",
         "Noor", "Elena", "Marcus", "Yuki", "Sofia", "Kwame", "Ingrid", "Rafael", "Mei", "Oliver", "Amara",
         "Jonas", "Leila", "Mateo", "Hana", "Felix", "Zara", "Diego", "Anya", "Theo", "Nia", "Gabriel",
         "Signe", "Omar", "Lucia", "Ravi", "Clara", "Emeka", "Rosa", "Wen"]
CITIES = ["Porto", "Lisbon", "Osaka", "Denver", "Tallinn", "Valencia", "Hanoi", "Austin", "Bergen", "Cork",
          "Busan", "Tucson", "Ghent", "Leeds", "Perth", "Quito", "Kyoto", "Seville", "Halifax", "Bologna",
          "Krakow", "Oaxaca", "Dunedin", "Tbilisi", "Marseille", "Lyon", "Cusco", "Sapporo"]
JOBS = ["baker", "nurse", "firefighter", "paramedic", "architect", "dental hygienist", "tattoo artist",
        "sous-chef", "part-time barista", "high-school teacher", "software engineer", "veterinarian",
        "carpenter", "pilot", "librarian", "florist", "physiotherapist", "wedding photographer", "electrician",
        "marine biologist", "yoga instructor", "bus driver", "pharmacist", "accountant", "locksmith",
        "beekeeper", "sommelier", "court stenographer"]
RELATIONS = {"sister": "she", "brother": "he", "cousin": "they", "aunt": "she", "uncle": "he",
             "best friend": "they", "roommate": "they", "neighbor": "they", "sister-in-law": "she",
             "brother-in-law": "he", "grandma": "she", "mom": "she", "dad": "he", "coworker": "they"}
PETS = ["dog", "cat", "parrot", "rabbit", "tortoise", "hamster", "ferret", "corgi"]
PET_NAMES = ["Biscuit", "Mochi", "Pepper", "Ziggy", "Noodle", "Waffles", "Clementine", "Tofu", "Bandit",
             "Pickles", "Juniper", "Pretzel", "Nacho", "Marble", "Sprocket", "Dumpling", "Figaro",
             "Pistachio", "Truffle", "Gizmo"]
ITEMS = ["bike", "guitar", "kayak", "camera", "sofa", "telescope", "espresso machine", "backpack", "typewriter"]
COLORS = ["teal", "mustard-yellow", "navy", "olive-green", "burgundy", "cream", "charcoal", "coral", "lilac"]
CARS = ["Honda Civic", "Toyota Corolla", "Subaru Outback", "VW Golf", "Mazda CX-5", "Kia Soul", "Fiat 500",
        "Volvo V60", "Ford Fiesta", "Tesla Model 3"]
CJK_SHOPS = ["珍珠奶茶", "小笼包", "章鱼烧", "煎饼果子", "铜锣烧"]
EVENTS = ["driving test", "dentist appointment", "job interview", "pottery exam", "citizenship interview",
          "half-marathon", "piano recital"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]

# habits that say what someone would enjoy: (question, words, messages that use them)
HABITS: list[tuple[str, str, list[str]]] = [
    ("Would {X} enjoy a trip to a national park?", "hiking camping tent trail",
     ["went hiking again this weekend, the trail was muddy but gorgeous", "bought a new tent for camping season!",
      "camping by the lake was perfect, we hiked the ridge trail at sunrise",
      "my boots are wrecked from all the hiking lol"]),
    ("Would {X} like a sourdough baking class?", "baking sourdough bread oven",
     ["my sourdough starter is finally bubbly", "baked two loaves of bread today, the oven is my best friend",
      "tried a rye sourdough, baking is so calming", "I think I'm addicted to baking bread now"]),
    ("Would {X} enjoy tickets to a jazz festival?", "jazz saxophone vinyl gig",
     ["found an old jazz vinyl at the flea market", "practised saxophone for two hours, neighbors love me haha",
      "went to a tiny jazz gig downtown last night", "my saxophone teacher says I'm improving"]),
    ("Would {X} enjoy a surfing holiday?", "surfing waves wetsuit board",
     ["caught some great waves this morning", "need a new wetsuit, mine has a hole",
      "surfing at dawn is the best feeling", "waxed my board and watched the surf report all evening"]),
    ("Would {X} like a watercolor workshop?", "painting watercolor sketchbook canvas",
     ["filled another page of my sketchbook", "started a watercolor of the harbour",
      "painting all Sunday, I forgot to eat", "bought a huge canvas, no idea what to paint yet"]),
    ("Would {X} enjoy a chess tournament?", "chess openings puzzles club",
     ["did chess puzzles on the train again", "studying openings for the club night",
      "won three games at chess club!", "my chess rating went up 40 points"]),
]


@dataclass(frozen=True, slots=True)
class Person:
    name: str
    role: str  # "user" for the first speaker, "assistant" for the second


@dataclass(slots=True)
class Plant:
    """A message to place in a session: ``key`` ties it to its question's evidence."""

    session: int
    speaker: int  # 0 or 1
    text: str
    key: str
    reply: str | None = None  # the other's answer right after it (small talk, no fact)


@dataclass(slots=True)
class Draft:
    """What a conversation is planned to hold before its messages are laid out."""

    rng: random.Random
    people: tuple[Person, Person]
    dates: list[datetime]
    plants: list[Plant] = field(default_factory=list)
    questions: list[tuple[str, str, str, list[str]]] = field(default_factory=list)  # category, q, answer, keys
    cities: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    pet_names: list[str] = field(default_factory=list)
    relatives: list[tuple[int, str]] = field(default_factory=list)  # (speaker, relation), unused ones

    def take(self, pool: list[str]) -> str:
        return pool.pop()

    def relative(self) -> tuple[int, str]:
        return self.relatives.pop()

    def plant(self, session: int, speaker: int, text: str, reply: str | None = None) -> str:
        key = f"p{len(self.plants)}"
        self.plants.append(Plant(session, speaker, text, key, reply))
        return key


def _apos(rng: random.Random) -> str:
    return rng.choice(("'", "’"))


def _poss(name: str, rng: random.Random) -> str:
    return f"{name}{_apos(rng)}s"


def format_date(day: datetime, rng: random.Random) -> str:
    """The date as a person might type it: one of several explicit forms."""
    month = MONTHS[day.month - 1]
    suffix = "th" if 11 <= day.day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10, "th")
    forms = [f"{day.day} {month}", day.strftime("%Y-%m-%d"), f"{month} {day.day}{suffix}",
             f"{day.day} {month} {day.year}", f"{month} {day.day}, {day.year}"]
    return rng.choice(forms)


def reference_date(day: datetime) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def _two_sessions(d: Draft, gap: int = 2) -> tuple[int, int]:
    n = len(d.dates)
    first = d.rng.randrange(0, n - gap - 1)
    return first, d.rng.randrange(first + gap, n)


# -- the facts, one planner per kind ---------------------------------------------------------

def plan_single(d: Draft, kind: str) -> None:
    r = d.rng
    s = r.randrange(len(d.dates))
    if kind in ("job", "city", "pet", "weight", "shop"):
        who, rel = d.relative()
        name = d.people[who].name
        pron = RELATIONS[rel]
        a = _apos(r)
        if kind == "job":
            job = d.take(d.jobs)
            text = r.choice([f"did I tell you my {rel}{a}s {_an(job)} now? {pron} {_s(pron, 'love')} it",
                             f"my {rel} finally qualified as {_an(job)}, so proud",
                             f"being {_an(job)} keeps my {rel} super busy lol, I barely see {_obj(pron)}"])
            q, ans = f"What is {_poss(name, r)} {rel}{_apos(r)}s job?", job
        elif kind == "city":
            city = d.take(d.cities)
            text = r.choice([f"my {rel} lives in {city}, I want to visit soon",
                             f"my {rel}{a}s apartment in {city} is tiny but so cute"])
            q, ans = f"Where does {_poss(name, r)} {rel} live?", city
        elif kind == "pet":
            pet, pname = r.choice(PETS), d.take(d.pet_names)
            text = r.choice([f"my {rel}{a}s {pet} {pname} knocked over a plant again haha",
                             f"{pname}, my {rel}{a}s {pet}, is the cutest thing ever"])
            q, ans = f"What is the name of {_poss(name, r)} {rel}{_apos(r)}s {pet}?", pname
        elif kind == "weight":
            pet, kg = r.choice(PETS), r.randint(2, 19)
            text = f"my {rel}{a}s {pet} weighs {kg} kg now, the vet says that{a}s fine"
            q, ans = f"How much does {_poss(name, r)} {rel}{_apos(r)}s {pet} weigh?", f"{kg} kg"
        else:
            shop = r.choice(CJK_SHOPS)
            text = f"my {rel} opened a {shop} shop downtown!! 超好吃, you have to try it"
            q, ans = f"What kind of shop did {_poss(name, r)} {rel} open?", f"{shop} shop"
        d.questions.append(("single_hop", q, ans, [d.plant(s, who, text, _reply(r))]))
        return
    who = r.randrange(2)
    name = d.people[who].name
    if kind == "item":
        item, color = r.choice(ITEMS), r.choice(COLORS)
        text = f"finally bought {_an(color)} {item}!! been saving for months"
        q, ans = f"What color is {_poss(name, r)} new {item}?", color
    else:  # distance
        km = r.randint(4, 25)
        text = f"ran {km}km this morning, a new personal best"
        q, ans = f"How far did {name} run for {_their(name)} personal best?", f"{km}km"
    d.questions.append(("single_hop", q, ans, [d.plant(s, who, text, _reply(r))]))


def plan_temporal(d: Draft, kind: str) -> None:
    r = d.rng
    s1, s2 = _two_sessions(d, gap=3)
    if kind in ("job", "moved"):
        who, rel = d.relative()
        name = d.people[who].name
        if kind == "job":
            old, new = d.take(d.jobs), d.take(d.jobs)
            t1 = f"my {rel} works as {_an(old)}, the hours are brutal"
            t2 = r.choice([f"big news: my {rel} quit being {_an(old)} and is {_an(new)} now!",
                           f"my {rel} started as {_an(new)} this week, no more {old} shifts"])
            q, ans = f"What is {_poss(name, r)} {rel}{_apos(r)}s job now?", new
        else:
            c1, c2 = d.take(d.cities), d.take(d.cities)
            t1 = f"my {rel} lives in {c1} and keeps sending me food pics"
            t2 = f"my {rel} moved from {c1} to {c2} last week, long drive"
            q, ans = f"Which city does {_poss(name, r)} {rel} live in now?", c2
    else:
        who = r.randrange(2)
        name = d.people[who].name
        if kind == "home":
            c1, c2 = d.take(d.cities), d.take(d.cities)
            t1 = f"I love living in {c1}, the cafés here are great"
            t2 = f"moving day done! I officially live in {c2} now, goodbye {c1}"
            q, ans = f"Which city does {name} live in now?", c2
        else:
            car1, car2 = r.sample(CARS, 2)
            t1 = f"my {car1} has been so reliable, 9 years and counting"
            t2 = f"sold the {car1} finally, I drive a {car2} now"
            q, ans = f"What car does {name} drive now?", car2
    keys = [d.plant(s1, who, t1, _reply(r)), d.plant(s2, who, t2, _reply(r))]
    d.questions.append(("temporal", q, ans, keys))


def plan_date(d: Draft, kind: str) -> None:
    r = d.rng
    s = r.randrange(len(d.dates))
    when = d.dates[s].replace(hour=0, minute=0, second=0)
    ahead = r.random() < 0.5
    day = when + timedelta(days=r.randint(5, 40)) if ahead else when - timedelta(days=r.randint(3, 20))
    written = format_date(day, r)
    if kind == "trip":
        who = r.randrange(2)
        city = d.take(d.cities)
        text = (f"booked it! flying to {city} on {written}" if ahead
                else f"back from {city}, we flew out on {written} and it went by too fast")
        q = f"When did {d.people[who].name} go to {city}?"
    elif kind == "wedding":
        who, rel = d.relative()
        a = _apos(r)
        text = (f"my {rel}{a}s wedding is on {written}, I still need an outfit" if ahead
                else f"my {rel}{a}s wedding on {written} was beautiful, I cried twice")
        q = f"When was {_poss(d.people[who].name, r)} {rel}{_apos(r)}s wedding?"
    else:
        who = r.randrange(2)
        event = r.choice(EVENTS)
        text = (f"my {event} is on {written}, so nervous" if ahead
                else f"my {event} on {written} went ok I think")
        q = f"When was {_poss(d.people[who].name, r)} {event}?"
    d.questions.append(("date", q, reference_date(day), [d.plant(s, who, text, _reply(r))]))


def plan_multi_hop(d: Draft, kind: str) -> None:
    r = d.rng
    s1, s2 = _two_sessions(d)
    who, rel = d.relative()
    name = d.people[who].name
    a = _apos(r)
    if kind == "city_job":
        city, job = d.take(d.cities), d.take(d.jobs)
        t1 = f"my {rel} lives in {city} now, the rent there is wild"
        t2 = f"my {rel} got hired as {_an(job)}, finally!"
        q = r.choice([f"What does the person who lives in {city} do for work?",
                      f"What is the job of {_poss(name, r)} relative who lives in {city}?"])
        ans = job
    elif kind == "job_pet":
        job, pet, pname = d.take(d.jobs), r.choice(PETS), d.take(d.pet_names)
        t1 = f"my {rel} is {_an(job)}, {RELATIONS[rel]} {_s(RELATIONS[rel], 'tell')} wild stories"
        t2 = f"my {rel}{a}s {pet} {pname} stole a sandwich off the table lol"
        q = f"What is the name of the {pet} that belongs to the {job} {name} knows?"
        ans = pname
    else:  # job_city
        job, city = d.take(d.jobs), d.take(d.cities)
        t1 = f"my {rel} trained as {_an(job)}, took years"
        t2 = f"visiting my {rel} in {city} next weekend, {RELATIONS[rel]} {_s(RELATIONS[rel], 'live')} right by the river"
        q = f"In which city does the {job} {name} talks about live?"
        ans = city
    if r.random() < 0.5:
        s1, s2 = s2, s1  # either fact may come first
    keys = [d.plant(s1, who, t1, _reply(r)), d.plant(s2, who, t2, _reply(r))]
    d.questions.append(("multi_hop", q, ans, keys))


def plan_inference(d: Draft, habit: int) -> None:
    r = d.rng
    question, words, texts = HABITS[habit]
    who = r.randrange(2)
    sessions = r.sample(range(len(d.dates)), 3)
    keys = [d.plant(s, who, t, _reply(r)) for s, t in zip(sorted(sessions), r.sample(texts, 3), strict=True)]
    used = " ".join(p.text for p in d.plants[-3:]).lower()
    reference = " ".join(w for w in words.split() if w in used)
    d.questions.append(("open_inference", question.format(X=d.people[who].name), reference, keys))


def _an(phrase: str) -> str:
    return f"an {phrase}" if phrase[0].lower() in "aeiou" else f"a {phrase}"


def _s(pron: str, verb: str) -> str:
    """The verb agreeing with the pronoun: "she loves", "they love"."""
    return verb if pron == "they" else f"{verb}s"


def _obj(pron: str) -> str:
    return {"she": "her", "he": "him"}.get(pron, "them")


def _their(name: str) -> str:
    del name  # the generator does not know anyone's pronouns; "their" is always right
    return "their"


def _reply(r: random.Random) -> str:
    return r.choice(REPLIES)


REPLIES = ["oh nice!!", "no way, that's amazing", "haha love that", "wow, good for them", "that's so cool",
           "omg really?", "ha, of course", "aww", "that's wild", "nice, tell me more next time",
           "honestly iconic", "wait what, since when?", "good news at last", "ugh I'm jealous"]


# -- small talk ------------------------------------------------------------------------------

FOODS = ["ramen", "tacos", "pad thai", "lasagna", "pho", "falafel", "pierogi", "bibimbap", "paella", "curry",
         "dumplings", "shakshuka", "gnocchi", "banh mi", "poke"]
SHOWS = ["that baking competition show", "the new detective series", "a documentary about octopuses",
         "the dating show everyone hates", "a cooking show set in Japan", "that space drama",
         "an old sitcom rerun", "the true-crime podcast", "a reality show about tiny houses"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
CHORES = ["laundry", "meal prep", "cleaning the fridge", "taxes", "groceries", "fixing the sink",
          "sorting the closet", "answering emails"]
STREET_PET_NAMES = ["Buddy", "Max", "Coco", "Rocky", "Bella", "Milo", "Daisy", "Oscar"]

OPENERS = ["hey {other}! how was your week?", "hiii, long time no chat", "morning {other} ☀️",
           "hey you, got a minute?", "ok I have so much to tell you", "yo, how's it going?",
           "hey {other}, you around?", "heyyy what are you up to"]
ANSWERS_TO_OPENER = ["pretty good! busy but good", "hey! just finished {chore}", "tired lol, you?",
                     "not bad, the week flew by", "hey! yes, I'm here", "all good, just made {food}"]
CLOSERS = ["ok gotta run, talk soon!", "night night 🌙", "talk later, say hi to everyone",
           "ok I'm off, have a good one", "bye!! chat tomorrow maybe", "gotta go cook, ttyl"]
SMALL_TALK: dict[str, list[str]] = {
    "weather": ["the heating in my flat is broken, of course it is", "foggy morning, couldn't see the street", "rain all week, my umbrella gave up", "we had hail for ten minutes, so weird", "it's pouring here again", "so hot today, like 31°C", "finally some sun this week",
                "the wind is insane tonight", "snow?? in this month??", "perfect sweater weather honestly",
                "it's been grey for days, I need vitamin D", "the forecast says storms all {weekday}"],
    "food": ["tried a {food} spot in {city} once, still think about it", "lunch was sad desk salad again", "I burnt the rice, how does one burn rice", "we're doing {food} night on {weekday}", "made {food} for dinner, turned out great", "I could eat {food} every day",
             "there's a new {food} place near me", "ordered {food} again, no regrets",
             "we had 火锅 last night, so good", "do you have a good {food} recipe?",
             "bought 2 kg of apples for no reason lol", "my {food} was way too salty tonight"],
    "tv": ["what are you watching lately?", "the actor from {show} was at my café?? maybe", "I rewatched the whole thing in 3 days oops", "they cancelled my favourite show 😭", "started watching {show}", "have you seen {show}? it's so bad it's good",
           "I fell asleep during {show} again", "no spoilers but the finale!!",
           "binged half a season of {show} yesterday", "my {rel} keeps telling me to watch {show}"],
    "plans": ["any plans for the weekend?", "I'm doing {chore} all {weekday} probably",
              "thinking of a day trip somewhere", "nothing planned, which is the plan haha",
              "I want to visit {city} someday", "we might go to the market on {weekday}",
              "my {rel} wants to go to {city} next year", "walked {walk}km to the market, my legs hurt"],
    "work": ["work was chaos today", "my inbox is a disaster", "had six meetings back to back",
             "my boss finally approved my time off", "I read an article about {job}s, seems stressful",
             "a {job} came to fix something at the office lol", "today was slow, which I didn't mind",
             "今天好累 lol, work was nonstop"],
    "family": ["my {rel} is redoing the kitchen, it's chaos", "my {rel} and I argued about politics again",
               "my {rel}'s new haircut is... a choice", "my {rel} keeps asking when I'll visit",
               "my {rel} lost their phone at the {food} place", "my {rel}’s friend is moving to {city} apparently",
               "my {rel} got me into crosswords", "dinner at my {rel}'s place on {weekday}, they made {food}",
               "my {rel} is obsessed with crosswords now", "my {rel} wants everyone at dinner on {weekday}", "my {rel} says hi btw", "my {rel} called for like an hour", "family dinner on {weekday}, pray for me",
               "my {rel} sent me a meme I didn't get", "my {rel}'s birthday is coming up, any gift ideas?",
               "my {rel}’s car broke down again haha", "my {rel} is visiting {city} for a conference"],
    "pets": ["a {pet} in a tiny raincoat walked past me today", "how do people keep a {pet} calm at the vet?", "my feed is all {pet} memes now", "saw a {pet} at the park that looked exactly like a cartoon", "a neighbor's {pet} named {street_pet} "
             "keeps visiting us", "do you think a {pet} would be a lot of work?", "I want a {pet} so bad",
             "the {pet} videos on my feed are getting out of hand", "my {rel} is thinking about getting a {pet}"],
    "sport": ["did you see the match last night?", "my team lost again, I'm done with them", "thinking of joining a gym, again",
              "my knee hurts from volleyball", "the stadium was packed on {weekday}", "who's winning the league this year?",
              "went to a spin class, I'm dead", "my {rel} is coaching a kids' football team"],
    "shopping": ["bought socks, my life is thrilling", "the sales are dangerous this week", "returned that jacket, it was weird",
                 "do you like the new store on the corner?", "spent way too much at the market", "I need new running shoes soon",
                 "found a lamp at a thrift shop for 5 bucks", "my cart is full of stuff I don't need"],
    "holidays": ["I need a holiday so bad", "my {rel} booked a cruise, can you imagine", "what did you do for the long weekend?",
                 "we might rent a cabin later this year", "airports stress me out", "flights to {city} are so cheap rn",
                 "I only have 4 days of leave left", "someone at work just got back from {city}, so tanned"],
    "misc": ["lost my keys for the third time this week", "my laptop fan sounds like a jet", "I reorganised my bookshelf by colour lol", "my phone screen cracked again", "I need a haircut desperately", "slept 10 hours, feel amazing",
             "my plant is dying and I don't know why", "I finally did {chore}", "coffee number three today lol",
             "the bus was 20 min late", "bought new headphones, the noise-cancelling is magic"],
}
# second and third sentences: small talk's padding, which a fact message gets too
ASIDES = ["honestly I don't know how people do it", "anyway, how are things with you?",
          "I keep meaning to tell you about it", "it's been one of those weeks", "not complaining though",
          "I'll send you a picture later", "the whole thing took way longer than I thought",
          "which is very on brand for me", "I was laughing about it all evening", "we should catch up properly soon",
          "my sleep schedule is a mess because of it", "I told everyone at work, they were not impressed",
          "it made my whole day tbh", "I still can't believe it", "so that was my {weekday}",
          "let me know what you think", "ok rant over haha", "the timing was terrible but whatever",
          "it reminded me of that thing you said last time", "I'm trying to be more positive about it",
          "my {rel} thinks I'm overreacting", "we had {food} after, which helped", "no regrets at all",
          "I need to write this stuff down", "it's a long story, I'll explain later",
          "the weather didn't help either", "it was cheaper than I expected", "what a day honestly"]
REACTIONS = ["haha same", "omg yes", "lol", "that's fair", "nooo", "ugh I feel that", "honestly same",
             "wait really?", "love that for you", "hmm maybe", "ha true", "sounds nice", "oof", "yesss",
             "that's so random haha", "totally", "no way", "aw that's sweet", "good call"]


def _fill(r: random.Random, template: str, d: Draft, speaker: int, pools: dict[str, list[str]]) -> str:
    slots = {"other": d.people[1 - speaker].name, "food": r.choice(FOODS), "show": r.choice(SHOWS),
             "weekday": r.choice(WEEKDAYS), "chore": r.choice(CHORES), "city": r.choice(pools["city"]),
             "job": r.choice(pools["job"]), "rel": r.choice(list(RELATIONS)), "pet": r.choice(PETS),
             "street_pet": r.choice(STREET_PET_NAMES), "walk": str(r.randint(1, 3))}
    return template.format(**slots)


def _join(a: str, b: str) -> str:
    return f"{a} {b}" if a.endswith(("?", "!", ".")) else f"{a}. {b}"


def _pad(r: random.Random, line: str) -> str:
    """One to three sentences: the line, maybe an aside or two."""
    for _ in range(r.choices((0, 1, 2), weights=(25, 45, 30))[0]):
        line = _join(line, r.choice(ASIDES))
    return line


def _pad_fact(r: random.Random, text: str, d: Draft, speaker: int, pools: dict[str, list[str]]) -> str:
    """A fact said in passing: its message may go on with an aside or two."""
    for _ in range(r.choices((0, 1, 2), weights=(40, 45, 15))[0]):
        text = _join(text, _fill(r, r.choice(ASIDES), d, speaker, pools))
    return text


def _small_talk(d: Draft, length: int, pools: dict[str, list[str]]) -> list[tuple[int, str]]:
    """A session's filler: an opener, a few topics, a closer; speakers mostly alternate."""
    r = d.rng
    first = r.randrange(2)
    out = [(first, _fill(r, r.choice(OPENERS), d, first, pools)),
           (1 - first, _fill(r, r.choice(ANSWERS_TO_OPENER), d, 1 - first, pools))]
    speaker = first
    while len(out) < length - 1:
        # family talk comes up twice as often: it is what the facts are about, so the decoys are too
        topic = r.sample(SMALL_TALK[r.choice([*SMALL_TALK, "family"])], k=6)  # no line twice in a topic
        for _ in range(r.randint(3, 6)):
            if r.random() < 0.8:
                speaker = 1 - speaker
            line = topic.pop() if topic and r.random() < 0.7 else r.choice(REACTIONS)
            if r.random() < 0.4 and topic:  # more on the same topic
                line = _join(line, topic.pop())
            out.append((speaker, _fill(r, _pad(r, line), d, speaker, pools)))
    last = r.randrange(2)
    out.append((last, _fill(r, r.choice(CLOSERS), d, last, pools)))
    return out


# -- a conversation ----------------------------------------------------------------------------

def _plan(r: random.Random, people: tuple[Person, Person], sessions: int) -> Draft:
    start = datetime(2022, 1, 3, tzinfo=UTC) + timedelta(days=r.randint(0, 540))
    dates, day = [], start
    for _ in range(sessions):
        dates.append(day.replace(hour=r.randint(8, 21), minute=r.randint(0, 59)))
        day += timedelta(days=r.randint(3, 12))
    d = Draft(r, people, dates, cities=r.sample(CITIES, len(CITIES)), jobs=r.sample(JOBS, len(JOBS)),
              pet_names=r.sample(PET_NAMES, len(PET_NAMES)),
              relatives=r.sample([(w, rel) for w in (0, 1) for rel in RELATIONS], 2 * len(RELATIONS)))
    for kind in r.sample(["job", "city", "pet", "weight", "shop", "item", "distance"], QUOTA["single_hop"]):
        plan_single(d, kind)
    for kind in r.sample(["job", "moved", "home", "car"], QUOTA["temporal"]):
        plan_temporal(d, kind)
    for _ in range(QUOTA["date"]):
        plan_date(d, r.choice(["trip", "trip", "wedding", "event"]))
    for kind in r.sample(["city_job", "job_pet", "job_city"], QUOTA["multi_hop"]):
        plan_multi_hop(d, kind)
    for habit in r.sample(range(len(HABITS)), QUOTA["open_inference"]):
        plan_inference(d, habit)
    return d


def _distractor_pools(d: Draft) -> dict[str, list[str]]:
    """Cities and jobs small talk may name: any that is no question's answer (a city in
    a question is fine, and makes a good decoy)."""
    answers = {w for _, _, ans, _ in d.questions for w in ans.lower().split()}
    return {"city": [c for c in CITIES if c.lower() not in answers],
            "job": [j for j in JOBS if not set(j.lower().split()) & answers]}


def generate_chat(number: int, people: tuple[Person, Person], r: random.Random) -> beam.BeamChat:
    target = r.randint(400, 1200)
    sessions = max(12, round(target / r.uniform(28, 40)))
    d = _plan(r, people, sessions)
    pools = _distractor_pools(d)
    planted_by_session: dict[int, list[Plant]] = {}
    for p in d.plants:
        planted_by_session.setdefault(p.session, []).append(p)
    messages: list[beam.BeamMessage] = []
    key_ids: dict[str, int] = {}
    per_session = target // sessions
    for s, when in enumerate(d.dates):
        lines: list[tuple[int, str, str | None]] = [
            (w, t, None) for w, t in _small_talk(d, max(8, per_session + r.randint(-6, 6)), pools)]
        for p in planted_by_session.get(s, []):
            at = r.randint(2, len(lines) - 1)  # after the greeting, before the goodbye
            text = _pad_fact(r, p.text, d, p.speaker, pools)
            block: list[tuple[int, str, str | None]] = [(p.speaker, text, p.key)]
            if p.reply is not None:
                block.append((1 - p.speaker, p.reply, None))
            lines[at:at] = block
        stamp = when
        for w, text, key in lines:
            if key is not None:
                key_ids[key] = len(messages)
            who = people[w]
            messages.append(beam.BeamMessage(len(messages), who.role, text, stamp, s + 1, who.name))
            stamp += timedelta(seconds=r.randint(20, 300))
    questions: list[beam.BeamQuestion] = []
    counts: dict[str, int] = {}
    for category, q, ans, keys in d.questions:
        ids = [key_ids[k] for k in keys]
        index = counts.get(category, 0)
        counts[category] = index + 1
        questions.append(beam.BeamQuestion(chat=number, ability=category, index=index, question=q,
                                           evidence_ids=tuple(ids), reference=(ans,),
                                           raw={"question": q, "answer": ans, "source_chat_ids": ids}))
    questions.sort(key=lambda q: (q.ability, q.index))
    return beam.BeamChat(number, tuple(messages), tuple((m.id,) for m in messages), tuple(questions),
                         f"{people[0].name} and {people[1].name}")


def generate(seed: int = DEFAULT_SEED, conversations: int = DEFAULT_CONVERSATIONS) -> list[beam.BeamChat]:
    """The set: ``conversations`` chats (numbered from 1), each a different pair of people."""
    if not 1 <= conversations <= len(NAMES) // 2:
        raise ValueError(f"conversations must be between 1 and {len(NAMES) // 2}")
    r = random.Random(f"chitchat-{seed}")
    names = r.sample(NAMES, 2 * conversations)
    return [generate_chat(n + 1, (Person(names[2 * n], "user"), Person(names[2 * n + 1], "assistant")),
                          random.Random(f"chitchat-{seed}-{n + 1}")) for n in range(conversations)]


def turn_rows(n: int, flag: str = "--turns") -> list[dict[str, Any]]:
    """The first ``n`` turns of the set's first chat as ``conv.add()`` keyword rows (the
    benchmarks' short casual chat); exits naming ``flag`` when the chat is shorter."""
    chat = generate(conversations=1)[0]
    if len(chat.messages) < n:
        raise SystemExit(f"the generated chat has {len(chat.messages)} messages, fewer than {flag} {n}")
    return [{"role": m.role, "content": m.content, "name": m.name, "created_at": m.created_at}
            for m in chat.messages[:n]]


def write(chats: Sequence[beam.BeamChat], root: Path) -> None:
    """The set in BEAM's file shape, readable by ``beam.load_chat``."""
    root.mkdir(parents=True, exist_ok=True)
    for chat in chats:
        folder = root / str(chat.number)
        folder.mkdir(exist_ok=True)
        batches: dict[int, list[list[dict[str, Any]]]] = {}
        for m in chat.messages:
            batches.setdefault(m.batch, []).append([{"role": m.role, "id": m.id, "content": m.content,
                                                     "name": m.name, "created_at": m.created_at.isoformat()}])
        by_id = chat.by_id()
        out = [{"batch_number": b, "time_anchor": by_id[turns[0][0]["id"]].created_at.strftime("%B-%d-%Y"),
                "turns": turns} for b, turns in sorted(batches.items())]
        (folder / "chat.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        probing: dict[str, list[dict[str, Any]]] = {}
        for q in chat.questions:
            probing.setdefault(q.ability, []).append(q.raw)
        (folder / "probing_questions.json").write_text(json.dumps(probing, indent=1, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    topics = [{"id": c.number, "title": c.topic} for c in chats]
    (root / "topics.json").write_text(json.dumps(topics, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--conversations", type=int, default=DEFAULT_CONVERSATIONS)
    ap.add_argument("--out", type=Path, required=True, help="folder to write the set to")
    args = ap.parse_args(argv)
    chats = generate(args.seed, args.conversations)
    write(chats, args.out)
    for c in chats:
        print(f"{c.number}: {c.topic}: {len(c.messages)} messages, {len({m.batch for m in c.messages})} sessions, "
              f"{len(c.questions)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
