"""The static facts worlds are drawn from: airports, city pairs, carriers, aircraft, names.

Held-out means disjoint by construction: every city pair and every name pool belongs to one
split only, so a test world shares no route and no passenger with any train world. Every city
pair has at least one city with two airports, so "the same city" and "the same route" differ
on every task route.
"""

from __future__ import annotations

SPLIT_NAMES = ("train", "test")

# code, name, city, country
AIRPORTS = [
    ("PEK", "Beijing Capital International", "Beijing", "CN"),
    ("PKX", "Beijing Daxing International", "Beijing", "CN"),
    ("PVG", "Shanghai Pudong International", "Shanghai", "CN"),
    ("SHA", "Shanghai Hongqiao International", "Shanghai", "CN"),
    ("CTU", "Chengdu Shuangliu International", "Chengdu", "CN"),
    ("TFU", "Chengdu Tianfu International", "Chengdu", "CN"),
    ("CAN", "Guangzhou Baiyun International", "Guangzhou", "CN"),
    ("SZX", "Shenzhen Bao'an International", "Shenzhen", "CN"),
    ("HGH", "Hangzhou Xiaoshan International", "Hangzhou", "CN"),
    ("XIY", "Xi'an Xianyang International", "Xi'an", "CN"),
    ("CKG", "Chongqing Jiangbei International", "Chongqing", "CN"),
    ("HKG", "Hong Kong International", "Hong Kong", "HK"),
    ("TPE", "Taiwan Taoyuan International", "Taipei", "TW"),
    ("TSA", "Taipei Songshan", "Taipei", "TW"),
    ("NRT", "Tokyo Narita International", "Tokyo", "JP"),
    ("HND", "Tokyo Haneda", "Tokyo", "JP"),
    ("KIX", "Osaka Kansai International", "Osaka", "JP"),
    ("ITM", "Osaka Itami", "Osaka", "JP"),
    ("ICN", "Seoul Incheon International", "Seoul", "KR"),
    ("GMP", "Seoul Gimpo International", "Seoul", "KR"),
    ("BKK", "Bangkok Suvarnabhumi", "Bangkok", "TH"),
    ("DMK", "Bangkok Don Mueang International", "Bangkok", "TH"),
    ("KUL", "Kuala Lumpur International", "Kuala Lumpur", "MY"),
    ("SZB", "Kuala Lumpur Subang", "Kuala Lumpur", "MY"),
    ("CGK", "Jakarta Soekarno-Hatta International", "Jakarta", "ID"),
    ("HLP", "Jakarta Halim Perdanakusuma", "Jakarta", "ID"),
    ("SIN", "Singapore Changi", "Singapore", "SG"),
    ("LHR", "London Heathrow", "London", "GB"),
    ("LGW", "London Gatwick", "London", "GB"),
    ("CDG", "Paris Charles de Gaulle", "Paris", "FR"),
    ("ORY", "Paris Orly", "Paris", "FR"),
    ("MXP", "Milan Malpensa", "Milan", "IT"),
    ("LIN", "Milan Linate", "Milan", "IT"),
    ("IST", "Istanbul Airport", "Istanbul", "TR"),
    ("SAW", "Istanbul Sabiha Gokcen", "Istanbul", "TR"),
    ("JFK", "New York John F. Kennedy International", "New York", "US"),
    ("EWR", "Newark Liberty International", "New York", "US"),
    ("FRA", "Frankfurt am Main", "Frankfurt", "DE"),
]
AIRPORT_NAME = {code: name for code, name, _c, _k in AIRPORTS}
AIRPORT_CITY = {code: city for code, _n, city, _k in AIRPORTS}
CITY_AIRPORTS: dict[str, list[str]] = {}
for _code, _name, _city, _country in AIRPORTS:
    CITY_AIRPORTS.setdefault(_city, []).append(_code)

CARRIERS = [
    ("CA", "Air China"),
    ("MU", "China Eastern Airlines"),
    ("CZ", "China Southern Airlines"),
    ("HU", "Hainan Airlines"),
    ("3U", "Sichuan Airlines"),
    ("ZH", "Shenzhen Airlines"),
    ("CX", "Cathay Pacific"),
    ("CI", "China Airlines"),
    ("NH", "All Nippon Airways"),
    ("JL", "Japan Airlines"),
    ("KE", "Korean Air"),
    ("TG", "Thai Airways"),
    ("MH", "Malaysia Airlines"),
    ("GA", "Garuda Indonesia"),
    ("SQ", "Singapore Airlines"),
    ("BA", "British Airways"),
    ("AF", "Air France"),
    ("AZ", "ITA Airways"),
    ("TK", "Turkish Airlines"),
    ("LH", "Lufthansa"),
    ("UA", "United Airlines"),
]
CN = ("CA", "MU", "CZ", "HU", "3U", "ZH")

# (city, city) -> (block minutes, flights per direction per day, carriers); one split each
CITY_PAIRS: dict[str, dict[tuple[str, str], tuple[int, int, tuple[str, ...]]]] = {
    "train": {
        ("Beijing", "Shanghai"): (135, 10, CN),
        ("Beijing", "Guangzhou"): (195, 7, CN),
        ("Shanghai", "Shenzhen"): (150, 7, CN),
        ("Beijing", "Chengdu"): (170, 6, CN),
        ("Hangzhou", "Chengdu"): (160, 5, CN),
        ("Beijing", "Xi'an"): (125, 6, CN),
        ("Shanghai", "Chongqing"): (170, 5, CN),
        ("Shanghai", "Tokyo"): (190, 6, ("NH", "JL", "MU")),
        ("Beijing", "Seoul"): (120, 5, ("KE", "CA")),
        ("Taipei", "Hong Kong"): (105, 6, ("CI", "CX")),
        ("Tokyo", "Taipei"): (215, 5, ("CI", "JL", "NH")),
        ("Seoul", "Osaka"): (100, 5, ("KE", "NH")),
        ("Bangkok", "Singapore"): (145, 6, ("TG", "SQ")),
        ("Bangkok", "Hong Kong"): (165, 5, ("TG", "CX")),
        ("Kuala Lumpur", "Jakarta"): (125, 5, ("MH", "GA")),
        ("London", "Frankfurt"): (95, 6, ("BA", "LH")),
        ("Paris", "Milan"): (95, 5, ("AF", "AZ")),
        ("New York", "London"): (420, 5, ("BA", "UA")),
        ("Istanbul", "Paris"): (215, 4, ("TK", "AF")),
    },
    "test": {
        ("Beijing", "Shenzhen"): (200, 7, CN),
        ("Shanghai", "Chengdu"): (180, 6, CN),
        ("Chengdu", "Guangzhou"): (140, 6, CN),
        ("Shanghai", "Xi'an"): (140, 5, CN),
        ("Shanghai", "Seoul"): (120, 6, ("KE", "MU")),
        ("Beijing", "Tokyo"): (215, 5, ("NH", "CA")),
        ("Osaka", "Taipei"): (175, 4, ("CI", "JL")),
        ("Taipei", "Singapore"): (270, 4, ("CI", "SQ")),
        ("Bangkok", "Kuala Lumpur"): (120, 5, ("TG", "MH")),
        ("Jakarta", "Singapore"): (105, 5, ("GA", "SQ")),
        ("London", "Paris"): (75, 6, ("BA", "AF")),
        ("Milan", "Frankfurt"): (75, 5, ("AZ", "LH")),
        ("New York", "Paris"): (440, 4, ("AF", "UA")),
        ("Istanbul", "London"): (240, 4, ("TK", "BA")),
    },
}

# aircraft -> [(cabin, first row, last row, letter groups between aisles)]
AIRCRAFT: dict[str, list[tuple[str, int, int, tuple[str, ...]]]] = {
    "A320": [("business", 1, 2, ("AC", "DF")), ("economy", 3, 22, ("ABC", "DEF"))],
    "B738": [("business", 1, 2, ("AC", "DF")), ("economy", 3, 24, ("ABC", "DEF"))],
    "A333": [("business", 1, 4, ("AC", "DG", "HK")), ("economy", 5, 26, ("AC", "DEFG", "HK"))],
}

# name pools per split: disjoint first names, so no full name is in both
FIRST_NAMES = {
    "train": (
        "Wei",
        "Fang",
        "Lei",
        "Min",
        "Jing",
        "Tao",
        "Yan",
        "Hao",
        "Na",
        "Jun",
        "Xin",
        "Anna",
        "Ben",
        "Chloe",
        "David",
        "Emma",
        "Felix",
        "Grace",
        "Hiro",
        "Ines",
        "Jonas",
        "Kenji",
        "Laura",
        "Marco",
        "Nadia",
        "Omar",
        "Priya",
        "Quentin",
        "Rosa",
        "Sven",
    ),
    "test": (
        "Bo",
        "Chen",
        "Dan",
        "Ying",
        "Hui",
        "Kai",
        "Lan",
        "Mei",
        "Ping",
        "Qiang",
        "Rui",
        "Alice",
        "Bruno",
        "Clara",
        "Diego",
        "Elena",
        "Farid",
        "Hannah",
        "Ivan",
        "Julia",
        "Kofi",
        "Lena",
        "Mateo",
        "Nora",
        "Oscar",
        "Paula",
        "Ravi",
        "Sofia",
        "Tomas",
        "Yuki",
    ),
}
LAST_NAMES = {
    "train": (
        "Wang",
        "Zhang",
        "Liu",
        "Chen",
        "Yang",
        "Huang",
        "Zhao",
        "Wu",
        "Zhou",
        "Xu",
        "Muller",
        "Smith",
        "Tanaka",
        "Kim",
        "Garcia",
        "Novak",
        "Rossi",
        "Silva",
        "Dubois",
        "Jensen",
    ),
    "test": (
        "Li",
        "Sun",
        "Ma",
        "Zhu",
        "Hu",
        "Guo",
        "He",
        "Lin",
        "Luo",
        "Gao",
        "Schmidt",
        "Brown",
        "Sato",
        "Park",
        "Lopez",
        "Horvat",
        "Bianchi",
        "Costa",
        "Martin",
        "Larsen",
    ),
}
# passenger ids per split: disjoint number ranges
PASSENGER_IDS = {"train": (10_000, 50_000), "test": (50_000, 90_000)}

for _split in SPLIT_NAMES:
    for _pair in CITY_PAIRS[_split]:
        assert any(len(CITY_AIRPORTS[c]) > 1 for c in _pair), _pair
assert not {frozenset(p) for p in CITY_PAIRS["train"]} & {frozenset(p) for p in CITY_PAIRS["test"]}
assert not set(FIRST_NAMES["train"]) & set(FIRST_NAMES["test"])
