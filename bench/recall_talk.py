# ruff: noqa: E501  (a table of sentences reads best one template a line)
"""Templates of the multi-session recall set (bench/recall_set.py): dated activities,
people, and the small talk around them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """Something done on a session's day; `ask` takes {when} ("the Tuesday after …")."""

    report: tuple[str, ...]  # {x}: what
    values: tuple[str, ...]
    ask: str


ACTIVITIES: tuple[Activity, ...] = (
    Activity(("Cooked {x} tonight, turned out great.", "Tonight I cooked {x}, pretty proud of it."),
             ("a big pot of chili", "lemon chicken", "vegetable lasagna", "fish tacos", "mushroom soup", "dal"),
             "What did I cook {when}?"),
    Activity(("Watched {x} tonight, what a movie.", "Movie night: we watched {x}."),
             ("Arrival", "Paddington 2", "The Thing", "Past Lives", "Heat", "Spirited Away"),
             "Which movie did I watch {when}?"),
    Activity(("Finished reading {x} today, couldn't put the book down.", "Spent the day reading {x}, great book."),
             ("Project Hail Mary", "Normal People", "The Road", "Educated", "Klara and the Sun", "Station Eleven"),
             "What book was I reading {when}?"),
    Activity(("Baked {x} this afternoon, the kitchen smells amazing.", "Did some baking today: {x}."),
             ("banana bread", "cinnamon rolls", "a lemon tart", "focaccia", "oatmeal cookies", "a carrot cake"),
             "What did I bake {when}?"),
    Activity(("Visited {x} today, really worth it.", "We paid a visit to {x} this afternoon."),
             ("the botanical garden", "the science museum", "the old castle", "the aquarium", "the farmers market", "the sculpture park"),
             "Which place did I visit {when}?"),
    Activity(("Went running this morning, {x} along the river.", "Morning run done: {x}, legs are tired."),
             ("5 km", "8 km", "10 km", "12 km", "half an hour of intervals", "a slow 6 km"),
             "How far did I run {when}?"),
    Activity(("Had dinner at {x} tonight with friends.", "Dinner out tonight at {x}, so good."),
             ("the new sushi place", "a tapas bar", "the Lebanese grill", "a pizza place downtown", "the vegan bistro", "a Korean barbecue spot"),
             "Where did I have dinner {when}?"),
    Activity(("Played {x} with friends tonight, I lost badly.", "Game night: we played {x} until 1 am."),
             ("Catan", "poker", "Codenames", "mahjong", "chess", "Ticket to Ride"),
             "Which game did I play {when}?"),
    Activity(("Fixed {x} myself today, no plumber needed.", "Finally fixed {x}, took all morning."),
             ("the leaking tap", "the squeaky door", "the bike chain", "the wobbly table", "the broken lamp", "the garden gate"),
             "What did I fix {when}?"),
    Activity(("Listened to {x} all afternoon, such a good album.", "Had the album {x} on repeat today."),
             ("Rumours", "Blue by Joni Mitchell", "Kind of Blue", "Abbey Road", "Random Access Memories", "Currents"),
             "Which album did I listen to {when}?"),
    Activity(("Bought {x} at the market today.", "Picked up {x} while shopping today."),
             ("a new rug", "a cast iron pan", "running shoes", "a houseplant", "a winter coat", "a desk lamp"),
             "What did I buy {when}?"),
    Activity(("Called {x} today, we talked for an hour.", "Had a long phone call with {x} today."),
             ("my old college roommate", "the insurance company", "my landlord", "my former teacher", "the bank", "a recruiter"),
             "Who did I call {when}?"),
)  # fmt: skip

# A topic said once in a conversation, and how a question points at that session.
ANCHORS: tuple[tuple[str, str], ...] = (
    ("Thinking of repainting the kitchen a pale green.", "we talked about repainting the kitchen"),
    ("My laptop screen cracked, need to get it repaired.", "my laptop screen cracked"),
    ("The landlord says the rent is going up in the spring.", "the landlord raised the rent"),
    ("Our upstairs neighbours had a flood in their bathroom.", "the upstairs neighbours had the flood"),
    ("I'm trying to decide whether to adopt a cat.", "I was deciding about adopting a cat"),
    ("I lost my wallet on the bus, what a nightmare.", "I lost my wallet"),
    ("The power went out in our whole street last night.", "the power outage on our street"),
    ("We're planning a surprise party for Jordan's fortieth.", "we planned Jordan's surprise party"),
    ("Got a parking ticket outside the dentist, annoying.", "I got the parking ticket"),
    ("Work announced a reorganisation of the whole department.", "work announced the reorganisation"),
    ("I've been thinking about quitting social media.", "I talked about quitting social media"),
    ("The car failed its inspection because of the brakes.", "the car failed inspection"),
    ("There's a leak in the roof above the spare room.", "we found the roof leak"),
    ("Signed up for a first aid course through work.", "I signed up for the first aid course"),
    ("My phone fell in the lake during the boat trip.", "my phone fell in the lake"),
    ("Our flight home got cancelled and we slept at the airport.", "our flight got cancelled"),
    ("I sprained my ankle stepping off a curb.", "I sprained my ankle"),
    ("The washing machine died mid-cycle, water everywhere.", "the washing machine broke"),
    ("We started looking at houses outside the city.", "we started house hunting"),
    ("I finally asked for a raise at work.", "I asked for a raise"),
    ("Jury duty summons came in the mail.", "I got the jury duty summons"),
    ("A tree fell on the neighbour's fence in the storm.", "the tree fell in the storm"),
    ("We got locked out of the house and had to call a locksmith.", "we got locked out"),
    ("I had a job interview at a design agency.", "I had the design agency interview"),
    ("The heating broke during the cold snap.", "the heating broke"),
    ("My passport expired right before the trip.", "my passport expired"),
)  # fmt: skip


@dataclass(frozen=True)
class Relative:
    role: str  # "sister": said as "my sister"
    gender: str  # "f", "m" or "x" (either)


RELATIVES: tuple[Relative, ...] = (
    Relative("sister", "f"), Relative("brother", "m"), Relative("mom", "f"), Relative("dad", "m"),
    Relative("aunt", "f"), Relative("uncle", "m"), Relative("cousin", "x"),
    Relative("best friend", "x"), Relative("roommate", "x"), Relative("boss", "x"),
    Relative("neighbour", "x"), Relative("grandpa", "m"), Relative("niece", "f"), Relative("nephew", "m"),
)  # fmt: skip
FEMALE = ("Ana", "Beatriz", "Chiara", "Dana", "Elif", "Fatima", "Greta", "Hana", "Ingrid",
          "Joanna", "Kemi", "Lena", "Marisol", "Nadia", "Olga", "Paula", "Rosa", "Sana")  # fmt: skip
MALE = ("Arjun", "Bruno", "Cyril", "Dmitri", "Emil", "Farid", "Gustavo", "Hugo", "Idris",
        "Jonas", "Kofi", "Luis", "Milan", "Niko", "Oskar", "Pavel", "Rami", "Stefan")  # fmt: skip
INTRO = (
    "My {role} {name} {tail}.",
    "{name}, my {role}, {tail}.",
    "Oh, {name} {tail}. That's my {role}, by the way.",
)
INTRO_TAIL = (
    "is visiting next month", "just moved back to town", "called me this morning",
    "is turning forty soon", "sent me the funniest meme", "came over for lunch",
    "helped me move the couch", "is coming to stay for a week",
)  # fmt: skip
LEAD_IN = (
    "Had a long call with my {role} last night.", "Saw my {role} over the weekend.",
    "Caught up with my {role} over coffee.", "My {role} dropped by yesterday.",
)  # fmt: skip
LEAD_REPLY = ("Oh nice, how is {obj} doing?", "That's lovely. Any news from {obj}?",
              "How did that go?")  # fmt: skip


@dataclass(frozen=True)
class News:
    """A relative's news: said as "my {role} …" or "{Subj} …" after a lead-in turn."""

    say: tuple[str, ...]  # {who}: "my sister" or "She"; {pos}: her/his/their
    values: tuple[str, ...]
    ask: str  # {name}


NEWS: tuple[News, ...] = (
    News(("{who} just got a job at {x}.", "{who} started working at {x} this week."),
         ("a bakery downtown", "the children's hospital", "a law firm", "the city library", "a game studio"),
         "Where did {name} get a job?"),
    News(("{who} is moving to {x} in the spring.", "{who} decided to relocate to {x}."),
         ("Seattle", "Barcelona", "Nairobi", "Glasgow", "Santiago"),
         "Where is {name} moving?"),
    News(("{who} adopted a {x} last week.", "{who} came home with a {x}, a new pet!"),
         ("parrot", "greyhound", "pair of rabbits", "tortoise", "corgi"),
         "What pet did {name} adopt?"),
    News(("{who} has taken up {x}, apparently obsessed.", "{who} got really into {x} lately."),
         ("beekeeping", "rock climbing", "knitting", "woodworking", "birdwatching"),
         "What hobby has {name} gotten into?"),
    News(("{who} broke {pos} {x} skiing.", "{who} fractured {pos} {x} falling off a ladder."),
         ("wrist", "ankle", "collarbone", "leg", "elbow"),
         "What did {name} break?"),
    News(("{who} is going to {x} on vacation.", "{who} booked a vacation in {x}."),
         ("Japan", "Iceland", "Peru", "Morocco", "Vietnam"),
         "Where is {name} going on vacation?"),
    News(("{who} is going back to school to study {x}.", "{who} enrolled in a {x} program."),
         ("nursing", "architecture", "law", "accounting", "graphic design"),
         "What is {name} going to study?"),
    News(("{who} wants to open {x}.", "{who} is planning to open {x} next year."),
         ("a food truck", "a yoga studio", "a bike shop", "a bookstore", "a coffee cart"),
         "What does {name} want to open?"),
    News(("{who} has surgery on {pos} {x} next week.", "{who} is scheduled for {x} surgery."),
         ("knee", "shoulder", "hip", "back", "eye"),
         "What surgery is {name} having?"),
    News(("{who} bought a house in {x}.", "{who} finally closed on a house in {x}."),
         ("the suburbs", "the countryside", "a village by the sea", "the old town", "a mountain town"),
         "Where did {name} buy a house?"),
)  # fmt: skip

SMALL_TALK: tuple[str, ...] = (
    "Morning! Hope your day is going well.", "Thanks, that's really helpful.",
    "Haha, that makes sense.", "Okay, let me think about that for a bit.",
    "Can you explain that again more simply?", "I'm so tired today, didn't sleep well.",
    "Could you give me a few more ideas?", "Let's pick this up again tomorrow.",
    "Interesting, I never thought about it that way.", "How do I make a good risotto?",
    "Can you help me write an email to my landlord about the heating?",
    "What's a good way to structure a weekly to-do list?",
    "Any movie recommendations for a rainy evening?", "How do I remove a red wine stain?",
    "Explain compound interest like I'm five.", "What's the difference between a latte and a flat white?",
    "How do I politely decline a wedding invitation?", "What are good stretches after sitting all day?",
    "I should really cook more instead of ordering in.", "Any tips for reading more books?",
    "Work is crazy this week, so many meetings.", "What should I bake for a work potluck?",
    "I want to start running again but it's so cold.", "Is it worth buying a house right now?",
    "My job is fine, just a bit boring lately.", "How long should I rest after a sprain?",
    "What's a good board game for four people?", "Any good albums to listen to while working?",
    "How do I fix a dripping tap?", "What's a healthy dinner I can make in 20 minutes?",
    "My phone battery dies so fast now.", "Do you think I should learn to play an instrument?",
    "I need a vacation so badly.", "What are some good questions to ask in a job interview?",
    "How do I keep houseplants alive in winter?", "Can you suggest a weekend itinerary for a small city?",
    "I keep procrastinating on my taxes.", "Is it rude to leave a party early?",
    "What's the best way to learn a new language as an adult?", "How often should I call my family?",
    "Any advice on sleeping better?", "The weather has been so grey lately.",
    "I'm thinking about getting a pet at some point.", "My family group chat is chaos.",
    "What's a nice gift for someone who has everything?", "How do I say no to extra work politely?",
    "Can you recommend a podcast about history?", "I had the weirdest dream last night.",
    "Coffee number three today, not great.", "Should I buy a new laptop or repair the old one?",
    "How do I start a conversation with neighbours?", "What's a good stretch routine before a run?",
)  # fmt: skip

ASSISTANT: tuple[str, ...] = (
    "That sounds exciting! Let me know if you want help planning anything around it.",
    "Great question. It depends on your situation, but here are a few pointers.",
    "I'd suggest starting small and building a routine you can keep up.",
    "Here are three options you could consider, each with pros and cons.",
    "That's completely understandable. Many people feel the same way.",
    "Sure! Here's a simple step-by-step approach you can follow.",
    "Good thinking. It's worth checking the details before you commit.",
    "I hope that helps! Feel free to ask follow-up questions any time.",
    "Oh no, that sounds stressful. Is there anything I can do to help?",
    "Nice! That's a great way to spend the day.",
)
# Replies that pick up the user's words without the fact: {topic} is a few of them.
ECHO: tuple[str, ...] = (
    "Thanks for sharing that about {topic}! If it comes up again I'm happy to help you plan.",
    "That's great to hear about {topic}. Want some practical tips?",
    "Oh nice, {topic} sounds like a big part of your week. Tell me more if you like.",
    "Noted about {topic}. How are you feeling about it?",
)
