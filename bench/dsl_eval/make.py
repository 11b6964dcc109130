#!/usr/bin/env python3
"""Writes the query-DSL evaluation set: two indices of our own (books, tickets) beside the shared iris
index, and the questions with the answers computed here, in Python, from the documents themselves.

    python3 bench/dsl_eval/make.py          # rewrites bench/dsl_eval/*.json and *.ndjson

Deterministic (seeded). Each question has a `kind` and an `expected` answer:
  count    hits.total, or a metric aggregation's value, equals the number
  ids      the returned hits are exactly these documents (`ordered`: in this order)
  value    a metric aggregation's value, or the first hit's `field`, equals the number (±0.01)
  buckets  a terms aggregation has exactly these keys with these document counts
and a `gold` request body, which the test suite runs on the embedded index to check the answer here
against the engine (two independent computations must agree).
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
IRIS = os.path.join(HERE, "..", "..", "..", "shared", "data", "iris.ndjson")
rng = random.Random(20261123)

# ---------------------------------------------------------------- books
TOPICS = {
    "dragon": "a young dragon learns to fly over the northern mountains",
    "space": "a crew of explorers travels through space to a distant planet",
    "cooking": "a chef shares simple recipes for cooking at home",
    "murder": "a detective investigates a murder in a quiet village",
    "garden": "a practical guide to growing vegetables in a small garden",
    "war": "two brothers fight on opposite sides of a long war",
    "robot": "a lonely robot searches for the engineer who built it",
    "ocean": "a marine biologist maps the coral reefs of the ocean",
}
GENRES = {"dragon": "fantasy", "space": "science-fiction", "cooking": "cookbook", "murder": "mystery",
          "garden": "non-fiction", "war": "history", "robot": "science-fiction", "ocean": "non-fiction"}
ADJ = ["Silent", "Golden", "Broken", "Hidden", "Last", "Frozen", "Burning", "Secret", "Endless", "Lost"]
NOUN = {"dragon": "Wing", "space": "Star", "cooking": "Kitchen", "murder": "Alibi", "garden": "Harvest",
        "war": "Front", "robot": "Circuit", "ocean": "Tide"}
AUTHORS = ["Maria Lopez", "John Carter", "Aiko Tanaka", "Peter Novak", "Sarah Evans", "Omar Haddad"]

books = []
topics = list(TOPICS)
for i in range(40):
    topic = topics[i % len(topics)]
    year = 1995 + (i * 7) % 30
    month = 1 + (i * 5) % 12
    day = 1 + (i * 11) % 28
    books.append({
        "_id": f"b{i + 1}",
        "title": f"The {ADJ[(i * 3) % len(ADJ)]} {NOUN[topic]}" + (f" {i // len(topics) + 1}" if i >= len(topics) else ""),
        "author": AUTHORS[(i * 5 + i // 7) % len(AUTHORS)],
        "genre": GENRES[topic],
        "summary": TOPICS[topic],
        "pages": 120 + (i * 37) % 500,
        "price": round(5 + ((i * 13) % 40) + ((i * 7) % 10) / 10 - 0.01, 2),
        "rating": round(2.5 + ((i * 17) % 25) / 10, 1),
        "published": f"{year:04d}-{month:02d}-{day:02d}",
        "in_stock": i % 3 != 0,
    })

BOOKS_MAPPING = {"mappings": {"properties": {
    "title": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
    "author": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
    "genre": {"type": "keyword"},
    "summary": {"type": "text"},
    "pages": {"type": "integer"},
    "price": {"type": "float"},
    "rating": {"type": "float"},
    "published": {"type": "date", "format": "yyyy-MM-dd"},
    "in_stock": {"type": "boolean"},
}}}

# ---------------------------------------------------------------- tickets
CATS = {
    "billing": ["I was charged twice for my subscription", "refund for the annual plan", "invoice shows the wrong amount"],
    "login": ["cannot reset my password", "two-factor code never arrives", "account locked after login attempts"],
    "shipping": ["package arrived damaged", "delivery is late by a week", "tracking number does not work"],
    "bug": ["app crashes when exporting a report", "search page shows an error", "dark mode breaks the settings screen"],
}
CUSTOMERS = ["acme", "globex", "initech", "umbrella", "hooli"]
AGENTS = ["dana", "lee", "sam"]
tickets = []
for i in range(60):
    cat = list(CATS)[i % 4]
    subject = CATS[cat][(i // 4) % 3]
    status = ["open", "pending", "closed", "closed", "closed"][(i * 7) % 5]
    priority = ["low", "medium", "medium", "high", "urgent"][(i * 3) % 5]
    month = 1 + (i * 7) % 6
    t = {
        "_id": f"t{i + 1}",
        "subject": subject,
        "category": cat,
        "status": status,
        "priority": priority,
        "customer": CUSTOMERS[(i * 2 + i // 5) % len(CUSTOMERS)],
        "agent": AGENTS[(i + i // 6) % len(AGENTS)],
        "response_minutes": 5 + (i * 29) % 240,
        "created_at": f"2025-{month:02d}-{1 + (i * 13) % 28:02d}T{(i * 5) % 24:02d}:{(i * 17) % 60:02d}:00Z",
    }
    if status == "closed":
        t["satisfaction"] = 1 + (i * 3) % 5
    if cat == "billing" and i % 8 == 0:
        t["refund_amount"] = round(10 + (i * 9.5) % 90, 2)
    tickets.append(t)

TICKETS_MAPPING = {"mappings": {"properties": {
    "subject": {"type": "text"},
    "category": {"type": "keyword"},
    "status": {"type": "keyword"},
    "priority": {"type": "keyword"},
    "customer": {"type": "keyword"},
    "agent": {"type": "keyword"},
    "response_minutes": {"type": "integer"},
    "satisfaction": {"type": "integer"},
    "refund_amount": {"type": "double"},
    "created_at": {"type": "date"},
}}}

# ---------------------------------------------------------------- iris
iris = []
with open(IRIS) as f:
    lines = [json.loads(l) for l in f if l.strip()]
for action, doc in zip(lines[0::2], lines[1::2]):
    d = dict(doc)
    d["_id"] = action["index"]["_id"]
    iris.append(d)


# ---------------------------------------------------------------- questions
def words(text):
    return set(text.lower().replace(",", " ").replace(".", " ").split())


def ids(docs, pred, key=None, reverse=False, limit=None):
    sel = [d for d in docs if pred(d)]
    if key:
        sel.sort(key=key, reverse=reverse)
    if limit:
        sel = sel[:limit]
    return [d["_id"] for d in sel]


def count(docs, pred):
    return sum(1 for d in docs if pred(d))


def mean(xs):
    xs = list(xs)
    return round(sum(xs) / len(xs), 4)


def buckets(docs, field, pred=lambda d: True):
    out = {}
    for d in docs:
        if pred(d) and field in d:
            out[str(d[field])] = out.get(str(d[field]), 0) + 1
    return out


Q = []


def q(index, question, kind, expected, gold, **extra):
    Q.append({"id": f"q{len(Q) + 1}", "index": index, "question": question, "kind": kind,
              "expected": expected, "gold": gold, **extra})


# iris (12)
q("iris-index", "How many iris flowers of type setosa are there?", "count",
  count(iris, lambda d: d["species"] == "setosa"), {"size": 0, "query": {"term": {"species.keyword": "setosa"}}})
q("iris-index", "How many flowers have a petal length greater than 5 cm?", "count",
  count(iris, lambda d: d["petal_length_in_cm"] > 5), {"size": 0, "query": {"range": {"petal_length_in_cm": {"gt": 5}}}})
q("iris-index", "What is the average sepal length of virginica flowers?", "value",
  mean(d["sepal_length_in_cm"] for d in iris if d["species"] == "virginica"),
  {"size": 0, "query": {"term": {"species.keyword": "virginica"}}, "aggs": {"a": {"avg": {"field": "sepal_length_in_cm"}}}})
q("iris-index", "What is the largest petal width of any flower?", "value",
  max(d["petal_width_in_cm"] for d in iris),
  {"size": 0, "aggs": {"a": {"max": {"field": "petal_width_in_cm"}}}}, field="petal_width_in_cm")
q("iris-index", "What is the smallest sepal width among versicolor flowers?", "value",
  min(d["sepal_width_in_cm"] for d in iris if d["species"] == "versicolor"),
  {"size": 0, "query": {"term": {"species.keyword": "versicolor"}}, "aggs": {"a": {"min": {"field": "sepal_width_in_cm"}}}},
  field="sepal_width_in_cm")
q("iris-index", "How many flowers of each species are there?", "buckets", buckets(iris, "species"),
  {"size": 0, "aggs": {"s": {"terms": {"field": "species.keyword"}}}})
q("iris-index", "How many versicolor flowers have a sepal length of at least 6.5 cm?", "count",
  count(iris, lambda d: d["species"] == "versicolor" and d["sepal_length_in_cm"] >= 6.5),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"species.keyword": "versicolor"}},
                                            {"range": {"sepal_length_in_cm": {"gte": 6.5}}}]}}})
q("iris-index", "Which flower has the longest sepal?", "ids",
  ids(iris, lambda d: True, key=lambda d: -d["sepal_length_in_cm"], limit=1),
  {"size": 1, "sort": [{"sepal_length_in_cm": "desc"}]}, ordered=True)
q("iris-index", "Show the flowers with a petal length below 1.2 cm.", "ids",
  ids(iris, lambda d: d["petal_length_in_cm"] < 1.2),
  {"query": {"range": {"petal_length_in_cm": {"lt": 1.2}}}})
q("iris-index", "How many flowers are not setosa?", "count",
  count(iris, lambda d: d["species"] != "setosa"),
  {"size": 0, "query": {"bool": {"must_not": [{"term": {"species.keyword": "setosa"}}]}}})
q("iris-index", "What is the total petal length of all setosa flowers?", "value",
  round(sum(d["petal_length_in_cm"] for d in iris if d["species"] == "setosa"), 4),
  {"size": 0, "query": {"term": {"species.keyword": "setosa"}}, "aggs": {"a": {"sum": {"field": "petal_length_in_cm"}}}})
q("iris-index", "How many flowers have a sepal width between 3.0 and 3.2 cm inclusive?", "count",
  count(iris, lambda d: 3.0 <= d["sepal_width_in_cm"] <= 3.2),
  {"size": 0, "query": {"range": {"sepal_width_in_cm": {"gte": 3.0, "lte": 3.2}}}})

# books (16)
q("books", "Find the books written by Aiko Tanaka.", "ids", ids(books, lambda d: d["author"] == "Aiko Tanaka"),
  {"size": 20, "query": {"term": {"author.keyword": "Aiko Tanaka"}}})
q("books", "How many fantasy books are there?", "count", count(books, lambda d: d["genre"] == "fantasy"),
  {"size": 0, "query": {"term": {"genre": "fantasy"}}})
q("books", "Which books are about a dragon?", "ids", ids(books, lambda d: "dragon" in words(d["summary"])),
  {"query": {"match": {"summary": "dragon"}}})
q("books", "What is the average price of science-fiction books?", "value",
  mean(d["price"] for d in books if d["genre"] == "science-fiction"),
  {"size": 0, "query": {"term": {"genre": "science-fiction"}}, "aggs": {"a": {"avg": {"field": "price"}}}})
q("books", "List the books with more than 550 pages.", "ids", ids(books, lambda d: d["pages"] > 550),
  {"query": {"range": {"pages": {"gt": 550}}}})
q("books", "How many books were published before 2000?", "count",
  count(books, lambda d: d["published"] < "2000-01-01"),
  {"size": 0, "query": {"range": {"published": {"lt": "2000-01-01"}}}})
q("books", "Which 5 books have the highest rating?", "ids",
  ids(books, lambda d: True, key=lambda d: (-d["rating"], int(d["_id"][1:])), limit=5),
  {"size": 5, "sort": [{"rating": "desc"}]})
q("books", "How many books are out of stock?", "count", count(books, lambda d: not d["in_stock"]),
  {"size": 0, "query": {"term": {"in_stock": False}}})
q("books", "What is the cheapest price of a mystery book?", "value",
  min(d["price"] for d in books if d["genre"] == "mystery"),
  {"size": 0, "query": {"term": {"genre": "mystery"}}, "aggs": {"a": {"min": {"field": "price"}}}}, field="price")
q("books", "How many books are in each genre?", "buckets", buckets(books, "genre"),
  {"size": 0, "aggs": {"g": {"terms": {"field": "genre"}}}})
q("books", "Find in-stock cookbooks that cost less than 20.", "ids",
  ids(books, lambda d: d["genre"] == "cookbook" and d["in_stock"] and d["price"] < 20),
  {"query": {"bool": {"filter": [{"term": {"genre": "cookbook"}}, {"term": {"in_stock": True}},
                                 {"range": {"price": {"lt": 20}}}]}}})
q("books", "How many books did Maria Lopez publish in 2010 or later?", "count",
  count(books, lambda d: d["author"] == "Maria Lopez" and d["published"] >= "2010-01-01"),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"author.keyword": "Maria Lopez"}},
                                            {"range": {"published": {"gte": "2010-01-01"}}}]}}})
q("books", "Which books mention a detective?", "ids", ids(books, lambda d: "detective" in words(d["summary"])),
  {"query": {"match": {"summary": "detective"}}})
q("books", "What is the total number of pages of all history books?", "value",
  sum(d["pages"] for d in books if d["genre"] == "history"),
  {"size": 0, "query": {"term": {"genre": "history"}}, "aggs": {"a": {"sum": {"field": "pages"}}}})
q("books", "How many books have a rating of 4.5 or higher?", "count", count(books, lambda d: d["rating"] >= 4.5),
  {"size": 0, "query": {"range": {"rating": {"gte": 4.5}}}})
q("books", "Which 3 books are the most recently published?", "ids",
  ids(books, lambda d: True, key=lambda d: d["published"], reverse=True, limit=3),
  {"size": 3, "sort": [{"published": "desc"}]}, ordered=True)

# tickets (16)
q("tickets", "How many tickets are still open?", "count", count(tickets, lambda d: d["status"] == "open"),
  {"size": 0, "query": {"term": {"status": "open"}}})
q("tickets", "How many urgent tickets does the customer acme have?", "count",
  count(tickets, lambda d: d["customer"] == "acme" and d["priority"] == "urgent"),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"customer": "acme"}}, {"term": {"priority": "urgent"}}]}}})
q("tickets", "What is the average response time in minutes of high priority tickets?", "value",
  mean(d["response_minutes"] for d in tickets if d["priority"] == "high"),
  {"size": 0, "query": {"term": {"priority": "high"}}, "aggs": {"a": {"avg": {"field": "response_minutes"}}}})
q("tickets", "How many tickets were created in March 2025?", "count",
  count(tickets, lambda d: d["created_at"].startswith("2025-03")),
  {"size": 0, "query": {"range": {"created_at": {"gte": "2025-03-01", "lt": "2025-04-01"}}}})
q("tickets", "Find tickets about a password.", "ids", ids(tickets, lambda d: "password" in words(d["subject"])),
  {"size": 20, "query": {"match": {"subject": "password"}}})
q("tickets", "How many tickets does each agent have?", "buckets", buckets(tickets, "agent"),
  {"size": 0, "aggs": {"a": {"terms": {"field": "agent"}}}})
q("tickets", "What is the total refund amount across all tickets?", "value",
  round(sum(d.get("refund_amount", 0) for d in tickets), 4),
  {"size": 0, "aggs": {"a": {"sum": {"field": "refund_amount"}}}})
q("tickets", "How many closed tickets have a satisfaction score of 4?", "count",
  count(tickets, lambda d: d["status"] == "closed" and d.get("satisfaction") == 4),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"status": "closed"}}, {"term": {"satisfaction": 4}}]}}})
q("tickets", "Which tickets have a refund amount?", "ids", ids(tickets, lambda d: "refund_amount" in d),
  {"query": {"exists": {"field": "refund_amount"}}})
q("tickets", "How many tickets took longer than 200 minutes to get a response?", "count",
  count(tickets, lambda d: d["response_minutes"] > 200),
  {"size": 0, "query": {"range": {"response_minutes": {"gt": 200}}}})
q("tickets", "How many tickets are there per category?", "buckets", buckets(tickets, "category"),
  {"size": 0, "aggs": {"c": {"terms": {"field": "category"}}}})
q("tickets", "Which 3 tickets waited longest for a response?", "ids",
  ids(tickets, lambda d: True, key=lambda d: -d["response_minutes"], limit=3),
  {"size": 3, "sort": [{"response_minutes": "desc"}]}, ordered=True)
q("tickets", "How many shipping tickets are not closed?", "count",
  count(tickets, lambda d: d["category"] == "shipping" and d["status"] != "closed"),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"category": "shipping"}}],
                                 "must_not": [{"term": {"status": "closed"}}]}}})
q("tickets", "What is the lowest satisfaction score given to the agent dana?", "value",
  min(d["satisfaction"] for d in tickets if d["agent"] == "dana" and "satisfaction" in d),
  {"size": 0, "query": {"term": {"agent": "dana"}}, "aggs": {"a": {"min": {"field": "satisfaction"}}}})
q("tickets", "How many billing or login tickets does globex have?", "count",
  count(tickets, lambda d: d["customer"] == "globex" and d["category"] in ("billing", "login")),
  {"size": 0, "query": {"bool": {"filter": [{"term": {"customer": "globex"}},
                                            {"terms": {"category": ["billing", "login"]}}]}}})
q("tickets", "How many tickets of each priority does initech have?", "buckets",
  buckets(tickets, "priority", lambda d: d["customer"] == "initech"),
  {"size": 0, "query": {"term": {"customer": "initech"}}, "aggs": {"p": {"terms": {"field": "priority"}}}})

# ---------------------------------------------------------------- write
for item in Q:
    if item["kind"] == "ids":
        assert 0 < len(item["expected"]) <= 10, (item["question"], item["expected"])


def ndjson(index, docs):
    out = []
    for d in docs:
        d = dict(d)
        _id = d.pop("_id")
        out.append(json.dumps({"index": {"_index": index, "_id": _id}}))
        out.append(json.dumps(d))
    return "\n".join(out) + "\n"


with open(os.path.join(HERE, "books-mapping.json"), "w") as f:
    json.dump(BOOKS_MAPPING, f, indent=1)
with open(os.path.join(HERE, "books.ndjson"), "w") as f:
    f.write(ndjson("books", books))
with open(os.path.join(HERE, "tickets-mapping.json"), "w") as f:
    json.dump(TICKETS_MAPPING, f, indent=1)
with open(os.path.join(HERE, "tickets.ndjson"), "w") as f:
    f.write(ndjson("tickets", tickets))
with open(os.path.join(HERE, "questions.json"), "w") as f:
    json.dump({"indices": {
        "iris-index": {"mapping": "../../../shared/data/iris-mapping.json", "data": "../../../shared/data/iris.ndjson"},
        "books": {"mapping": "books-mapping.json", "data": "books.ndjson"},
        "tickets": {"mapping": "tickets-mapping.json", "data": "tickets.ndjson"}},
        "questions": Q}, f, indent=1)
print(f"{len(Q)} questions: " + ", ".join(
    f"{i}: {sum(1 for x in Q if x['index'] == i)}" for i in ("iris-index", "books", "tickets")))
