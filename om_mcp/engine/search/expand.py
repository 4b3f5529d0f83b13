"""Related terms: hand-curated, general vocabulary of software work and everyday
life, so a question finds a message that says the same thing in other words
("hosting provider" -> "we deploy on Fly.io", "pets" -> "my dog").

Plain data, parsed once at import. Three kinds of lines:
- IRREGULAR: the forms of one irregular word (go went gone); they count as
  forms of each other, like regular inflections.
- SYNONYMS: words that mean nearly the same thing; each finds the others.
- KINDS: "kind words: members"; a kind word finds its members (closeness
  KIND_TO_MEMBER) and a member finds its kind words (MEMBER_TO_KIND), but
  members do not find each other (a dog is not a cat).
Query words are matched through their base form (dogs -> dog), so list base forms.
Keep it general: this list must help any conversation, not one benchmark.
"""

from __future__ import annotations

SYNONYM = 1.0
KIND_TO_MEMBER = 0.8
MEMBER_TO_KIND = 0.6

IRREGULAR = """
be was were been being is am are
have has had having
do does did done doing
go goes went gone going
get gets got gotten getting
make makes made making
take takes took taken taking
see sees saw seen seeing
come comes came coming
give gives gave given giving
find finds found finding
think thinks thought thinking
tell tells told telling
become becomes became becoming
leave leaves left leaving
feel feels felt feeling
bring brings brought bringing
begin begins began begun beginning
keep keeps kept keeping
hold holds held holding
write writes wrote written writing
stand stands stood standing
hear hears heard hearing
meet meets met meeting
run runs ran running
pay pays paid paying
sit sits sat sitting
speak speaks spoke spoken speaking
lead leads led leading
grow grows grew grown growing
lose loses lost losing
fall falls fell fallen falling
send sends sent sending
build builds built building
buy buys bought buying
win wins won winning
teach teaches taught teaching
catch catches caught catching
eat eats ate eaten eating
drink drinks drank drunk drinking
drive drives drove driven driving
ride rides rode ridden riding
fly flies flew flown flying
swim swims swam swum swimming
sing sings sang sung singing
draw draws drew drawn drawing
choose chooses chose chosen choosing
break breaks broke broken breaking
wear wears wore worn wearing
throw throws threw thrown throwing
forget forgets forgot forgotten forgetting
sell sells sold selling
spend spends spent spending
read reads reading
say says said saying
know knows knew known knowing
understand understands understood understanding
sleep sleeps slept sleeping
feed feeds fed feeding
fight fights fought fighting
hang hangs hung hanging
hide hides hid hidden hiding
lend lends lent lending
light lights lit lighting
shoot shoots shot shooting
sink sinks sank sunk sinking
steal steals stole stolen stealing
strike strikes struck striking
wake wakes woke woken waking
bite bites bit bitten biting
blow blows blew blown blowing
freeze freezes froze frozen freezing
shake shakes shook shaken shaking
child children
person people persons
man men
woman women
mouse mice
foot feet
tooth teeth
"""

SYNONYMS = """
kid child children
job work career occupation profession employment
boss manager supervisor
colleague coworker teammate
company employer firm business startup
salary pay wage income paycheck
house home apartment flat
car vehicle
trip journey travel vacation holiday getaway
photo picture pic photograph snapshot
movie film
buy purchase
gift present
friend buddy pal mate
partner spouse
wife husband spouse
mom mother mum
dad father
grandma grandmother
grandpa grandfather
doctor physician
sick ill illness disease
injury injured hurt accident
exam test
class course lesson
study studies studying learn
teacher instructor tutor professor
school college university
degree diploma graduation graduate
happy glad joyful delighted
sad unhappy upset down
scared afraid frightened fear
angry mad furious annoyed
worried anxious nervous stressed
tired exhausted
goal dream aim aspiration ambition plan
hobby pastime interest
talk chat conversation
meeting meetup call sync standup
bug error issue defect crash exception failure problem
fix patch repair resolve
deploy deployment release ship launch rollout
host hosting hosted provider deploy
server backend
frontend ui client
database db datastore
repo repository
laptop computer pc machine notebook
phone smartphone mobile cellphone
password credential secret
login signin authentication auth
price cost fee
cheap inexpensive affordable
expensive costly pricey
big large huge
small little tiny
begin start
finish complete done
favorite favourite beloved
like love enjoy
purchase buy bought got
visit tour
meet met
injury injured hurt wound
accident crash collision
wedding marriage married
pregnant pregnancy expecting
baby newborn infant
move relocate relocation
neighborhood neighbourhood area
win won victory champion championship
tournament competition contest championship
award prize trophy medal
dance dancing dancer
singer vocalist
artist painter
writer author novelist
recipe dish
dinner supper
vacation trip
concert show gig
fix repair
quit resign
hire recruit
fired laid layoff
retire retirement
volunteer volunteering
adopt adoption
pet pets
"""

KINDS = """
database db: postgres postgresql mysql mariadb sqlite mongodb mongo redis dynamodb cassandra oracle supabase
database db: firestore elasticsearch clickhouse snowflake bigquery
hosting host cloud provider deploy: aws gcp azure heroku fly vercel netlify render digitalocean linode hetzner
hosting host cloud provider deploy: cloudflare railway
language programming: python javascript typescript rust golang java kotlin swift ruby php scala elixir haskell
language programming: csharp lua
framework library: react vue angular svelte django flask fastapi rails spring express nextjs laravel nestjs
editor ide: vscode vim neovim emacs intellij pycharm sublime xcode
os: linux ubuntu debian fedora macos windows android ios
container orchestration: docker podman kubernetes k8s helm
queue broker: kafka rabbitmq sqs nats celery
monitoring observability logging: datadog prometheus grafana sentry newrelic opentelemetry
ci pipeline: jenkins circleci travis buildkite actions gitlab
test testing: pytest jest unittest mocha junit vitest cypress playwright selenium
package dependency: pip npm yarn pnpm poetry cargo maven gradle brew apt
payment billing: stripe paypal braintree invoice subscription
email mail: smtp sendgrid mailgun ses postmark gmail outlook
browser: chrome firefox safari edge
version vcs: git github gitlab bitbucket
family relative: mother mom mum father dad parent brother sister sibling son daughter kid child wife husband
family relative: grandma grandmother grandpa grandfather aunt uncle cousin niece nephew
pet animal: dog cat puppy kitten hamster rabbit bunny parrot bird fish turtle horse
sport exercise workout fitness: running jogging hiking swimming cycling biking yoga gym tennis soccer football
sport exercise workout fitness: basketball baseball golf skiing snowboarding surfing climbing volleyball hockey
sport exercise workout fitness: boxing pilates marathon karate
hobby activity pastime: painting drawing pottery knitting gardening reading writing photography cooking baking
hobby activity pastime: camping hiking fishing dancing singing gaming travel volunteering crafts sewing
hobby activity pastime: woodworking chess puzzles collecting
music: song band concert guitar piano violin drums singing album festival gig playlist jazz rock pop classical
music: rap orchestra choir
instrument: guitar piano violin drums flute cello saxophone trumpet ukulele bass keyboard clarinet harp
art artwork: painting drawing sculpture pottery sketch canvas mural gallery exhibition museum watercolor portrait
book reading: novel author story fiction library chapter poetry poem memoir biography
show tv television: series episode netflix documentary sitcom
food meal dish: recipe dinner lunch breakfast restaurant pizza pasta cake bread salad soup dessert sandwich burger
drink beverage: coffee tea beer wine juice soda cocktail smoothie
outdoors nature: park forest lake mountain beach river trail garden woods camping hiking
event: concert festival party conference workshop meetup fair parade wedding
celebration party: birthday anniversary wedding graduation holiday christmas thanksgiving easter halloween
game: chess poker videogame xbox playstation nintendo boardgame
clothes clothing outfit: dress shirt shoes jacket jeans sweater hat coat fashion
weather: rain snow sunny storm wind cold hot
charity volunteering cause: volunteer donate donation fundraiser nonprofit shelter
religion faith: church god pray prayer mosque temple
vehicle transport: car bike bicycle motorcycle bus train truck
money finance: budget savings saving income salary debt loan rent mortgage invest investment
health medical: doctor hospital clinic therapy therapist medicine surgery illness injury
emotion feeling mood: happy sad angry stressed anxious excited proud lonely scared nervous grateful
"""


def _lines(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.strip().splitlines() if line.split("#")[0].strip()]


def _build() -> tuple[dict[str, frozenset[str]], dict[str, dict[str, float]]]:
    irregular: dict[str, set[str]] = {}
    for line in _lines(IRREGULAR):
        group = line.split()
        for word in group:
            irregular.setdefault(word, set()).update(group)
    near: dict[str, dict[str, float]] = {}

    def link(a: str, b: str, closeness: float) -> None:
        if a != b:
            near.setdefault(a, {})[b] = max(near.get(a, {}).get(b, 0.0), closeness)

    for line in _lines(SYNONYMS):
        group = line.split()
        for a in group:
            for b in group:
                link(a, b, SYNONYM)
    for line in _lines(KINDS):
        head, _, tail = line.partition(":")
        kinds, members = head.split(), tail.split()
        for kind in kinds:
            for other in kinds:
                link(kind, other, SYNONYM)
            for member in members:
                link(kind, member, KIND_TO_MEMBER)
                link(member, kind, MEMBER_TO_KIND)
    return {w: frozenset(g) for w, g in irregular.items()}, near


_IRREGULAR, _NEAR = _build()


def irregular_forms(word: str) -> frozenset[str]:
    return _IRREGULAR.get(word, frozenset())


def related(word: str, bases: set[str] | frozenset[str] = frozenset()) -> dict[str, float]:
    """Words related to `word` (or to one of its base forms) with their closeness in (0, 1]."""
    found: dict[str, float] = {}
    for base in {word} | set(bases):
        for other, closeness in _NEAR.get(base, {}).items():
            found[other] = max(found.get(other, 0.0), closeness)
    for base in {word} | set(bases):
        found.pop(base, None)
    return found
