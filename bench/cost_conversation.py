"""The conversation the LLM-cost benchmark feeds both pipelines, and the scripted model's answers.

Six sessions of one user (124 turns: four in English, two in Chinese). Every exchange (one user
message and the assistant's reply) carries what a careful model would extract from it: facts,
and the odd episode, procedure or term. Facts come back across sessions — said again in other
words (`same_as`), or changed (`replaces`: the user moves, changes jobs, moves a trip) — so both
pipelines meet their reconciliation paths.

`bench.cost_answers` answers both pipelines' requests from these annotations. See
BENCHMARKS.md, "LLM cost".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fact:
    statement: str
    category: str = "other"
    profile_field: str | None = None
    same_as: str | None = None
    """An earlier fact's statement this one says again in other words."""
    replaces: str | None = None
    """An earlier fact's statement this one makes untrue."""


@dataclass(frozen=True)
class Exchange:
    user: str
    assistant: str
    facts: tuple[Fact, ...] = ()
    episodes: tuple[dict[str, Any], ...] = ()
    procedures: tuple[dict[str, Any], ...] = ()
    terms: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Session:
    session_id: str
    exchanges: tuple[Exchange, ...]

    def messages(self) -> list[dict[str, str]]:
        return [
            message
            for exchange in self.exchanges
            for message in (
                {"role": "user", "content": exchange.user},
                {"role": "assistant", "content": exchange.assistant},
            )
        ]


def _x(user: str, assistant: str, *facts: Fact, **annotations: Any) -> Exchange:
    return Exchange(user, assistant, tuple(facts), **annotations)


LIVES_BERLIN = "The user lives in Berlin."
WORKS_ZALANDO = "The user works as a data engineer at Zalando."
TRIP_MAY = "The user plans a trip to Lisbon in May."
DOG = "The user has a beagle called Pixel."
VEGETARIAN = "The user is vegetarian."
SPANISH = "The user is learning Spanish."
HIKING_ZH = "用户喜欢周末去爬山。"
DAUGHTER_ZH = "用户的女儿叫小雨。"
PIANO_ZH = "用户在学钢琴。"
KNEE = "The user has a sore left knee from running."

SESSIONS: tuple[Session, ...] = (
    Session(
        "s1-intro",
        (
            _x("hi! I'm new here", "Welcome! How can I help you today?"),
            _x(
                "I live in Berlin and I work as a data engineer at Zalando.",
                "Nice! Berlin has a great tech scene. What do you work on at Zalando?",
                Fact(LIVES_BERLIN, "basic_info", "location"),
                Fact(WORKS_ZALANDO, "work", "occupation"),
            ),
            _x(
                "Mostly streaming pipelines with Kafka. Long day though.",
                "Streaming pipelines are fun when they work. Hang in there!",
                Fact("The user builds streaming pipelines with Kafka.", "work"),
            ),
            _x(
                "I'm vegetarian, can you suggest a quick dinner?",
                "Sure: a chickpea curry with spinach takes about 25 minutes.",
                Fact(VEGETARIAN, "preference"),
                Fact("The assistant recommended a chickpea curry with spinach.", "other"),
            ),
            _x(
                "Sounds good. My beagle Pixel will beg for some anyway.",
                "Beagles always do! Keep the onions away from Pixel.",
                Fact(DOG, "relationship"),
                terms=(
                    {
                        "term": "Pixel",
                        "parent": "dog",
                        "definition": "the user's beagle",
                        "aliases": [],
                        "examples": [],
                    },
                ),
            ),
            _x(
                "I'm planning a trip to Lisbon in May with my partner Jonas.",
                "Lisbon in May is lovely. Do you want a rough plan?",
                Fact(TRIP_MAY, "plan"),
                Fact("The user's partner is Jonas.", "relationship"),
            ),
            _x(
                "Yes please, three days, we like walking and food markets.",
                "Day 1 Alfama and the castle, day 2 Belém and the LX Factory market, day 3 Sintra.",
                Fact("The user likes walking and food markets.", "preference"),
                Fact(
                    "The assistant planned three days in Lisbon: Alfama, Belém and Sintra.",
                    "plan",
                ),
            ),
            _x(
                "Always give me distances in kilometres, never miles.",
                "Understood: kilometres from now on.",
                procedures=(
                    {
                        "kind": "rule",
                        "trigger": "always",
                        "steps": ["Give distances in kilometres, never in miles"],
                        "applies_to": "the user",
                        "given_by": "the user",
                    },
                ),
            ),
            _x(
                "How far is Sintra from Lisbon?",
                "About 28 kilometres; the train from Rossio takes 40 minutes.",
            ),
            _x(
                "I've been learning Spanish on Duolingo, will that help in Portugal?",
                "A little: written Portuguese is close to Spanish, spoken less so.",
                Fact(SPANISH, "other"),
            ),
            _x("ok thanks, that's all for now", "Enjoy your evening!"),
            _x("bye", "Bye!"),
        ),
    ),
    Session(
        "s2-zh",
        (
            _x("你好,今天想聊聊周末的安排。", "好的,你周末一般做什么?"),
            _x(
                "我喜欢周末去爬山,最近常去香山。",
                "香山很不错,秋天的红叶特别好看。",
                Fact(HIKING_ZH, "preference"),
            ),
            _x(
                "我的女儿叫小雨,今年六岁,她也想一起去。",
                "六岁的孩子可以走短一点的路线。",
                Fact(DAUGHTER_ZH, "relationship"),
            ),
            _x(
                "对,小雨走不了太远。你有推荐吗?",
                "可以走香山公园里的环线,大约三公里,有很多休息的地方。",
                Fact("助手推荐了香山公园里约三公里的环线。", "other"),
            ),
            _x(
                "另外我最近在学钢琴,每天练半小时。",
                "坚持每天练习很好!你在练什么曲子?",
                Fact(PIANO_ZH, "other"),
            ),
            _x("在练小奏鸣曲,有点难。", "慢慢来,先分手练习,再合起来。"),
            _x("好的,谢谢!", "不客气!"),
            _x("再见", "再见,周末愉快!"),
        ),
    ),
    Session(
        "s3-changes",
        (
            _x("hey, it's me again", "Welcome back! What's new?"),
            _x(
                "Big news: I just started a new job as a data engineer at Spotify.",
                "Congratulations! Still in Berlin, or did you move?",
                Fact(
                    "The user works as a data engineer at Spotify.",
                    "work",
                    "employer",
                    replaces=WORKS_ZALANDO,
                ),
            ),
            _x(
                "Still in Berlin, Spotify has an office here.",
                "Great, no move needed then.",
                Fact("The user still lives in Berlin.", "basic_info", same_as=LIVES_BERLIN),
            ),
            _x(
                "We pushed the Lisbon trip to June because of the new job.",
                "June works well too, it is a bit warmer.",
                Fact("The user plans a trip to Lisbon in June.", "plan", replaces=TRIP_MAY),
            ),
            _x(
                "Pixel my beagle is coming to stay with my parents while we're away.",
                "Good plan, Pixel will be spoiled.",
                Fact("The user owns a beagle named Pixel.", "relationship", same_as=DOG),
            ),
            _x(
                "Last weekend I fixed my bike's brakes myself, first time!",
                "Well done! Disc or rim brakes?",
                episodes=(
                    {
                        "subject": "the user",
                        "title": "Fixed the bike brakes",
                        "summary": "The user fixed the brakes of the bike alone for the first "
                        "time last weekend.",
                        "participants": ["the user"],
                        "outcome": "the brakes were fixed",
                    },
                ),
            ),
            _x(
                "Rim brakes. I watched a video and replaced the pads.",
                "Rim pads are the easiest start. Check the alignment after a few rides.",
            ),
            _x(
                "I also signed up for the Berlin half marathon in September.",
                "Exciting! Do you want a training plan?",
                Fact("The user signed up for the Berlin half marathon in September.", "plan"),
            ),
            _x(
                "Yes, I can run three times a week.",
                "Then: one easy run, one interval session and one long run each week, adding "
                "one kilometre to the long run every week.",
                Fact(
                    "The assistant gave the user a half marathon plan of three runs a week.",
                    "plan",
                ),
                procedures=(
                    {
                        "kind": "workflow",
                        "trigger": "half marathon training",
                        "steps": [
                            "Do one easy run a week",
                            "Do one interval session a week",
                            "Do one long run a week, one kilometre longer every week",
                        ],
                        "applies_to": "the user",
                        "given_by": "assistant",
                    },
                ),
            ),
            _x("perfect", "Good luck with the training!"),
            _x("thanks, bye", "Bye!"),
        ),
    ),
    Session(
        "s4-work",
        (
            _x("morning!", "Good morning! How can I help?"),
            _x(
                "My left knee is sore after running, should I worry?",
                "Rest it for a few days and ice it; if it still hurts, see a physiotherapist.",
                Fact(KNEE, "health"),
            ),
            _x(
                "Ok. At Spotify we have a standup every day at 9:30.",
                "A daily standup, noted. Do you want reminders?",
                Fact("The user has a daily standup at 9:30 at work.", "work"),
                terms=(
                    {
                        "term": "standup",
                        "parent": "meeting",
                        "definition": "the team's daily meeting at 9:30",
                        "aliases": [],
                        "examples": [],
                    },
                ),
            ),
            _x(
                "No. But each Friday I write the weekly report: first collect the pipeline "
                "metrics, then list incidents, then send it to my manager Lena.",
                "Got it, that's your weekly report routine.",
                Fact("The user's manager is Lena.", "work"),
                procedures=(
                    {
                        "kind": "workflow",
                        "trigger": "weekly report on Fridays",
                        "steps": [
                            "Collect the pipeline metrics",
                            "List the incidents",
                            "Send the report to Lena",
                        ],
                        "applies_to": "the user",
                        "given_by": "the user",
                    },
                ),
            ),
            _x(
                "Can you draft this week's incident list? There was one Kafka outage.",
                "Incidents: one Kafka broker outage on Tuesday, 40 minutes, no data lost.",
            ),
            _x(
                "Good. I'm still vegetarian by the way, team lunch is at a steakhouse...",
                "Steakhouses usually have a grilled vegetable plate; call ahead.",
                Fact("The user does not eat meat.", "preference", same_as=VEGETARIAN),
            ),
            _x("haha ok", "Enjoy the lunch!"),
            _x(
                "One more: I prefer short answers with bullet points.",
                "Noted: short answers with bullet points.",
                Fact("The user prefers short answers with bullet points.", "preference"),
                procedures=(
                    {
                        "kind": "rule",
                        "trigger": "always",
                        "steps": ["Answer briefly with bullet points"],
                        "applies_to": "the user",
                        "given_by": "the user",
                    },
                ),
            ),
            _x("thanks", "You're welcome."),
            _x("bye", "Bye!"),
        ),
    ),
    Session(
        "s5-zh",
        (
            _x("又是我,周末过得很好。", "太好了!做了什么?"),
            _x(
                "我和小雨去爬了香山,她走完了整个环线。",
                "小雨真厉害!三公里对六岁的孩子不容易。",
                Fact("用户周末常去爬山。", "preference", same_as=HIKING_ZH),
                episodes=(
                    {
                        "subject": "the user",
                        "title": "和小雨爬香山",
                        "summary": "用户和女儿小雨去爬了香山,小雨走完了整个环线。",
                        "participants": ["the user", "小雨"],
                        "outcome": "小雨走完了环线",
                    },
                ),
            ),
            _x(
                "钢琴我已经不学了,改学吉他了。",
                "吉他也很好玩!你是学民谣还是古典?",
                Fact("用户在学吉他。", "other", replaces=PIANO_ZH),
            ),
            _x("民谣,每周上一次课。", "每周一次课加上每天练习,进步会很快。"),
            _x(
                "小雨下个月开始上小学了。",
                "恭喜!上学前可以一起去看看学校。",
                Fact("用户的女儿小雨下个月开始上小学。", "relationship"),
            ),
            _x("好主意。", "祝一切顺利!"),
            _x("谢谢,再见", "再见!"),
            _x(
                "对了,以后回答我请用中文。",
                "好的,以后我用中文回答你。",
                procedures=(
                    {
                        "kind": "rule",
                        "trigger": "always",
                        "steps": ["用中文回答用户"],
                        "applies_to": "the user",
                        "given_by": "the user",
                    },
                ),
            ),
            _x("好", "好的!"),
        ),
    ),
    Session(
        "s6-move",
        (
            _x("hi again", "Hi! What's up?"),
            _x(
                "We moved! I live in Hamburg now, Spotify let me work remotely.",
                "Congratulations on the move! How is Hamburg?",
                Fact(
                    "The user lives in Hamburg.",
                    "basic_info",
                    "location",
                    replaces=LIVES_BERLIN,
                ),
            ),
            _x(
                "Windy but nice. Pixel loves the beach on the Elbe.",
                "Beagles and beaches go well together.",
                Fact("The user's beagle Pixel loves the beach on the Elbe.", "relationship"),
            ),
            _x(
                "Can you find vegetarian restaurants near Ottensen? I don't eat meat.",
                "In Ottensen: Leaf, Mamalicious and the Saturday market stalls.",
                Fact("The user is a vegetarian.", "preference", same_as=VEGETARIAN),
                Fact(
                    "The assistant recommended vegetarian restaurants in Ottensen.",
                    "other",
                ),
            ),
            _x(
                "My Spanish is now at B1, still learning it every day.",
                "B1 is a solid level! Keep going.",
                Fact("The user's Spanish is at level B1.", "other"),
                Fact("The user is still learning Spanish.", "other", same_as=SPANISH),
            ),
            _x(
                "The knee is fine again, I'm back to running.",
                "Great news! Build the distance back up slowly.",
                Fact("The user's knee has healed.", "health", replaces=KNEE),
            ),
            _x(
                "How far is it from Hamburg to Lisbon?",
                "About 2,200 kilometres; a direct flight takes three hours.",
            ),
            _x(
                "And Jonas wants to come to the half marathon to cheer.",
                "Nice, supporters help a lot!",
            ),
            _x(
                "The Lisbon trip is still in June, right?",
                "Yes, you planned Lisbon for June.",
            ),
            _x("ok", "Anything else?"),
            _x("no, thanks", "Have a good day!"),
            _x("bye", "Bye!"),
        ),
    ),
)

USER_ID = "llm-cost-user"


def turn_count(sessions: Sequence[Session] = SESSIONS) -> int:
    return sum(2 * len(s.exchanges) for s in sessions)


def all_exchanges(sessions: Sequence[Session] = SESSIONS) -> list[Exchange]:
    return [exchange for session in sessions for exchange in session.exchanges]
