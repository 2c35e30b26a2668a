"""Arithmetic chains in prose: a quantity changes by a few events told as a story.

`A bus leaves the depot with 14 passengers. Then, in order: 5 passengers get on; 8 passengers get
off. Prove that at the end there are 11 passengers.` The proof follows the events one step each,
sometimes showing the sum (`14 + 5 = 19`), sometimes only the count, and concludes the final
count, which is what the problem claims. Kinds:

- `valid`: every count is right;
- `arithmetic`: one step computes its count wrong, later steps build on it;
- `wrong_operation`: one step adds what the event removes (or the reverse), computing correctly
  with the wrong operation: the numbers shown add up, only the reading of the event is wrong;
- `missed_event`: one event is never applied; the next step (or the conclusion) builds on the
  count before it;
- `conclusion`: every count is right, the conclusion states another number.
"""

from __future__ import annotations

import random

from proofcheck.data.families._base import Draft, Proof, big, heldout, pick, variant

KINDS = ("valid", "arithmetic", "wrong_operation", "missed_event", "conclusion")
# (opening, unit, event that adds c, event that removes c, how the claim names the end)
SCENES = (
    ("A tank holds {s} litres of water.", "litres", "{c} litres are poured in", "{c} litres are drained",
     "the tank then holds {v} litres"),
    ("Mia has {s} marbles.", "marbles", "she wins {c} marbles", "she gives {c} marbles to a friend",
     "Mia ends with {v} marbles"),
    ("A bus leaves the depot with {s} passengers.", "passengers", "{c} passengers get on",
     "{c} passengers get off", "at the end there are {v} passengers on the bus"),
    ("A bakery starts the day with {s} loaves.", "loaves", "{c} more loaves are baked", "{c} loaves are sold",
     "the bakery ends the day with {v} loaves"),
    ("An account holds {s} dollars.", "dollars", "{c} dollars are deposited", "{c} dollars are withdrawn",
     "the account then holds {v} dollars"),
)
SCENES_UNSEEN = heldout("prose.scene", (
    ("A library has {s} books on its shelves.", "books", "{c} books are returned", "{c} books are borrowed",
     "the library then has {v} books on its shelves"),
    ("A farmer keeps {s} sheep in a field.", "sheep", "{c} sheep are brought in", "{c} sheep are taken out",
     "there are {v} sheep in the field at the end"),
    ("A warehouse stores {s} boxes.", "boxes", "{c} boxes are delivered", "{c} boxes are shipped out",
     "the warehouse ends with {v} boxes"),
))
_PROBLEMS_UNSEEN = heldout("prose.problem", ("{opening} These events then happen one after another: {events}. "
                                             "Prove that {end}.",))
_SHOWN_UNSEEN = heldout("prose.shown", ("When {e}, the count changes to {a} {op} {c} = {v}.",
                                        "Because {e}, we now have {a} {op} {c} = {v} {unit}."))
_BARE_UNSEEN = heldout("prose.bare", ("Once {e}, the total stands at {v}.",))
_CONCLUDE_UNSEEN = heldout("prose.conclusion", ("Thus {end}, which was to be shown.", "This proves that {end}."))
_PROBLEMS = ("{opening} Then, in order: {events}. Prove that {end}.",
             "{opening} The following happens, in this order: {events}. Show that {end}.")
_SHOWN = ("After {e}, there are {a} {op} {c} = {v} {unit}.", "Then {e}: {a} {op} {c} = {v}.",
          "Next, {e}, so the count becomes {a} {op} {c} = {v}.")
_BARE = ("{E}, bringing the count to {v} {unit}.", "After {e}, the count is {v}.")
_CONCLUDE = ("So {end}, as claimed.", "Hence {end}.", "Therefore {end}.")


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _plan(rng: random.Random, kind: str) -> tuple[int, list[tuple[int, int]], int, list[int]]:
    """(start, events as (sign, amount), the wrong event's index or -1, the operation each step
    applies): redrawn until every count the proof writes is >= 0."""
    while True:
        start, length = rng.randint(10, big(40)), rng.randint(2 + variant().longer, 4 + variant().longer)
        events, value = [], start
        for _ in range(length):
            c = rng.randint(2, big(15))
            sign = rng.choice([1, -1]) if value - c >= 0 else 1
            events.append((sign, c))
            value += sign * c
        at = -1 if kind in ("valid", "conclusion") else rng.randrange(length)
        ops = [-s if i == at and kind == "wrong_operation" else s for i, (s, _) in enumerate(events)]
        shown, ok = start, True
        for i, ((_, c), op) in enumerate(zip(events, ops, strict=True)):
            if not (i == at and kind == "missed_event"):
                shown += op * c
                ok = ok and shown >= 3  # room for an arithmetic slip of -3
        if ok and len(set(events)) == len(events):  # distinct events: a skipped one is identifiable
            return start, events, at, ops


def make(rng: random.Random, kind: str) -> Draft:
    """One proof of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown prose kind {kind!r}; choose one of {', '.join(KINDS)}")
    opening, unit, add, remove, end = pick(rng, SCENES, SCENES_UNSEEN)
    start, events, at, ops = _plan(rng, kind)
    texts = [(add if s > 0 else remove).format(c=c) for s, c in events]
    p = Proof()
    true, shown = start, start
    for i, ((s, c), op) in enumerate(zip(events, ops, strict=True)):
        true_next = true + s * c
        if i == at and kind == "missed_event":
            true = true_next
            continue  # the proof never applies this event
        new = shown + op * c
        if i == at and kind == "arithmetic":
            new += rng.choice([-3, -2, -1, 1, 2, 3, 10])
        if rng.random() < 0.3 and kind != "wrong_operation":
            step = pick(rng, _BARE, _BARE_UNSEEN).format(e=texts[i], E=_cap(texts[i]), v=new, unit=unit)
        else:
            step = pick(rng, _SHOWN, _SHOWN_UNSEEN).format(e=texts[i], a=shown, op="+" if op > 0 else "-", c=c, v=new, unit=unit)
        calc = f"{true}{'+' if s > 0 else '-'}{c}={true_next}"
        re_ = {"redo": f"{texts[i]}: {true} {'+' if s > 0 else '-'} {c} = {true_next}", "says": str(new)}
        if new == true_next:
            p.add(step, f"{calc} ok.", **re_)
        elif i == at and kind == "wrong_operation":
            means = f"{texts[i]} means {'adding' if s > 0 else 'subtracting'} {c}"
            p.add(step, f"{means}: {calc}, not {new}.", f"{means}: {calc.replace('=', ' = ')}, not {new}.", **re_)
        elif shown != true:
            p.add(step, f"{calc}, not {new}: an event was skipped.",
                  f"the event before this one was never applied: the count is {true_next}, not {new}.", **re_)
        else:
            p.add(step, f"{calc}, not {new}.", f"{calc.replace('=', ' = ')}, not {new}.", **re_)
        true, shown = true_next, new
    claimed = shown + (rng.choice([-2, -1, 1, 2]) if kind == "conclusion" else 0)
    text = pick(rng, _CONCLUDE, _CONCLUDE_UNSEEN).format(end=end.format(v=claimed))
    re_ = {"redo": f"after every event the count is {true}", "says": str(claimed)}
    if claimed == true:
        p.add(text, f"the count is {true} ok.", **re_)
    elif kind == "missed_event" and at == len(events) - 1:
        p.add(text, f"'{texts[-1]}' is never applied: the count is {true}, not {claimed}.",
              f"the event '{texts[-1]}' is never applied: the count is {true}, not {claimed}.", **re_)
    else:
        p.add(text, f"the steps give {shown}, not {claimed}.", f"the steps give {shown}, not {claimed}.", **re_)
    problem = pick(rng, _PROBLEMS, _PROBLEMS_UNSEEN).format(opening=opening.format(s=start), events="; ".join(texts),
                                          end=end.format(v=claimed))
    ref = f"Start at {start} and apply each event in turn: the count ends at {true}."
    return p.draft(problem, ref, str(true), "arithmetic")
