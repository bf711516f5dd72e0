/**
 * The pretraining corpus of the embedded engine's base model: conversations it writes itself from a seed, in
 * the engine's chat template, with nothing read from outside. Every conversation is a list of chat messages
 * (and sometimes tools), rendered by the engine's own `renderPrompt`, so the base model reads and writes
 * exactly the text the backend serves: tool definitions as `Tools.make` derives them, calls in the
 * `<tool_call>` format, results in `tool` turns.
 *
 * The mix (each conversation drawn independently, by weight):
 * - tool use (0.35): a tools block of one to three tools, then one to four rounds of a question, the call of the
 *   right tool with the argument named in the question, its result (a word, a time, a number or a small JSON
 *   object), and an answer that uses it (the bare value, `{"answer": value}`, a sentence, or another JSON
 *   object holding it);
 * - copying (0.33): a value stated in the prompt asked back (bare, in a sentence, or as JSON), words to repeat,
 *   one entry of several named by its key;
 * - JSON (0.10): objects with word and number values, several read from the prompt;
 * - yes/no (0.08): membership, comparison of numbers, whether a word was in a list;
 * - choice (0.07): the one of a few options that answers the question (the larger number, the animal, ...);
 * - small talk and lists (0.07): greetings, short sentences, lists of words of a kind.
 *
 * Values that an answer copies (tool results, arguments, words to repeat) are half the time made-up words
 * (`Draw.word`, some 300,000 of them) rather than words of the lists, so the model cannot answer from memory and
 * learns to copy; the conversation names them (`copied`) and their copies are marked for the loss. A corpus
 * can also draw copying drills (`drilling`): copying conversations and tool rounds without the tools block.
 *
 * Tool conversations are ten times longer than the others (their tools block is most of them), so by tokens
 * they are still most of the corpus. All text is printable ASCII. The same seed gives the same conversations, in the same order.
 */
import type { Message, Tool } from "../../src/api/ChatMessage.js"
import { renderPrompt } from "../../src/local/engine/ChatTemplate.js"
import { Rng } from "../../src/local/engine/Random.js"
import { encode, IM_END, IM_START } from "../../src/local/engine/Tokenizer.js"

/** A conversation: its messages, and the tools offered in it. */
export interface Conversation {
  /** The messages, in order. */
  readonly messages: ReadonlyArray<Message>
  /** The tools offered (rendered in the leading block). */
  readonly tools?: ReadonlyArray<Tool> | undefined
  /**
   * The values the assistant's turns copy from earlier in the conversation (a tool's result, a word of the
   * prompt): where one occurs in an assistant turn, its tokens are marked as copied.
   */
  readonly copied?: ReadonlyArray<string> | undefined
}

/** A rendered conversation: its token ids, and what each token is (context, assistant, copied). */
export interface RenderedConversation {
  /** The token ids. */
  readonly ids: ReadonlyArray<number>
  /**
   * 0 where the token is context (the prompt, tools, results), 1 where it belongs to an assistant turn, 2 where
   * it is an assistant turn's copy of a value from earlier in the conversation (`Conversation.copied`).
   */
  readonly assistant: Uint8Array
}

const FRUITS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "peach", "pear", "plum"] as const
const ANIMALS = ["cat", "dog", "horse", "mouse", "tiger", "zebra", "sheep", "goat", "duck", "fox"] as const
const COLORS = ["red", "blue", "green", "yellow", "black", "white", "pink", "brown", "gray", "orange"] as const
const THINGS = ["lamp", "chair", "table", "book", "pen", "cup", "shirt", "shoe", "hat", "bag"] as const
const FOODS = ["bread", "milk", "cheese", "rice", "tea", "coffee", "egg", "soup", "honey", "salt"] as const
const CITIES = [
  "Oslo",
  "Paris",
  "Lima",
  "Cairo",
  "Rome",
  "Tokyo",
  "Delhi",
  "Quito",
  "Berlin",
  "Madrid",
  "Dublin",
  "Vienna",
  "Seoul",
  "Hanoi",
  "Lisbon",
  "Athens"
] as const
const NAMES = ["Ana", "Ben", "Cara", "Dan", "Eva", "Finn", "Gus", "Hana", "Ivan", "Jo", "Kim", "Leo", "Mia", "Noor"]
const WEATHERS = ["sunny", "rainy", "windy", "foggy", "cloudy", "snowy", "stormy", "clear"] as const
const ADJECTIVES = ["big", "small", "old", "new", "fast", "slow", "warm", "cold", "happy", "quiet", "bright", "soft"]
const VERBS = ["runs", "jumps", "sleeps", "sings", "walks", "reads", "waits", "looks", "eats", "plays"]
const PLACES = ["park", "house", "river", "garden", "market", "school", "road", "hill", "shop", "beach"]
const CODES = ["kiwi", "maple", "falcon", "orbit", "pixel", "delta", "ember", "lotus", "cobalt", "willow", "nova"]
const SHOP_ITEMS = [...FRUITS, ...FOODS, ...THINGS] as const
const CONSONANTS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"] as const
const VOWELS = ["a", "e", "i", "o", "u"] as const

/** The kinds of word, by the name a question uses for them. */
const KINDS: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["fruit", FRUITS],
  ["animal", ANIMALS],
  ["color", COLORS],
  ["city", CITIES],
  ["food", FOODS]
]

/** A seeded source of the corpus's random choices. */
class Draw {
  constructor(readonly rng: Rng) {}
  int(n: number): number {
    return this.rng.int(n)
  }
  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.rng.int(hi - lo + 1)
  }
  pick<A>(items: ReadonlyArray<A>): A {
    return items[this.rng.int(items.length)]!
  }
  chance(p: number): boolean {
    return this.rng.float() < p
  }
  /** `k` distinct items, in a random order. */
  some<A>(items: ReadonlyArray<A>, k: number): Array<A> {
    const pool = [...items]
    const out: Array<A> = []
    for (let i = 0; i < k && pool.length > 0; i++) out.push(pool.splice(this.rng.int(pool.length), 1)[0]!)
    return out
  }
  /**
   * A made-up word of two or three syllables (about 300,000 of them): a value no model can have memorised, so
   * an answer that holds one must copy it.
   */
  word(): string {
    let w = ""
    for (let i = this.range(2, 3); i > 0; i--) w += this.pick(CONSONANTS) + this.pick(VOWELS)
    return this.chance(0.3) ? w + this.pick(CONSONANTS) : w
  }
  /** A word of a list half the time, else a made-up word. */
  open(words: ReadonlyArray<string>): string {
    return this.chance(0.5) ? this.pick(words) : this.word()
  }
  /** A name of the list half the time, else a made-up one, capitalised. */
  openName(words: ReadonlyArray<string>): string {
    return this.chance(0.5) ? this.pick(words) : cap(this.word())
  }
  /** A number as people write one: mostly small integers, sometimes larger, sometimes with cents. */
  number(): number {
    const r = this.rng.float()
    if (r < 0.5) return this.range(0, 99)
    if (r < 0.8) return this.range(100, 999)
    if (r < 0.9) return this.range(1000, 99999)
    return this.range(1, 999) / 100 + this.range(0, 9)
  }
}

const cap = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

const user = (content: string): Message => ({ role: "user", content })
const assistant = (content: string): Message => ({ role: "assistant", content })
const SYSTEMS = ["You are a helpful assistant.", "Answer briefly.", "You are a shop assistant.", "Be concise."]

/** A system message, sometimes. */
const maybeSystem = (d: Draw): Array<Message> =>
  d.chance(0.2) ? [{ role: "system", content: d.pick(SYSTEMS) } as Message] : []

// -----------------------------------------------------------------------------------------------------------
// Tools
// -----------------------------------------------------------------------------------------------------------

/** A tool of the corpus: its definition, its argument, how a question asks for it, and its result. */
interface ToolSpec {
  readonly name: string
  readonly description: string
  /** The argument's name and the values it may take. */
  readonly param: string
  readonly values: ReadonlyArray<string>
  /** Whether the parameter's schema lists the values (`enum`), as `Schema.Literal` derives it. */
  readonly enumerated: boolean
  /** A question asking for the tool's answer about a value. */
  readonly ask: (d: Draw, value: string) => string
  /** The result: a value, and how an answer states it in a sentence. */
  readonly result: (d: Draw) => { readonly value: string | number; readonly sentence: (arg: string) => string }
  /** The property name of the value in a JSON answer. */
  readonly key: string
}

const TIME = (d: Draw): string =>
  d.chance(0.7)
    ? `${d.range(1, 12)}${d.pick(["am", "pm"])}`
    : `${d.range(0, 23)}:${String(d.range(0, 59)).padStart(2, "0")}`

/** The values a tool's argument may take: three to six, of a list or (half of them) made up. */
const openValues = (d: Draw, words: ReadonlyArray<string>, names: boolean): Array<string> => {
  const out = d.some(words, d.range(3, 6))
  for (let i = 0; i < out.length; i++) if (d.chance(0.5)) out[i] = names ? cap(d.word()) : d.word()
  return [...new Set(out)]
}

/** The tool families; their names and questions vary, so the model learns the pattern rather than a name. */
const toolFamilies = (d: Draw): ReadonlyArray<ToolSpec> => [
  {
    name: d.pick(["weather", "get_weather", "forecast"]),
    description: d.pick(["Weather in a city", "The current weather of a city", "Get the weather"]),
    param: "city",
    values: openValues(d, CITIES, true),
    enumerated: d.chance(0.6),
    ask: (d, city) =>
      d.pick([`What is the weather in ${city}?`, `How is the weather in ${city}?`, `Weather in ${city}?`]),
    result: (d) => {
      const w = d.open(WEATHERS)
      return { value: w, sentence: (city) => d.pick([`It is ${w} in ${city}.`, `The weather in ${city} is ${w}.`]) }
    },
    key: d.pick(["weather", "answer"])
  },
  {
    name: d.pick(["clock", "time", "get_time"]),
    description: d.pick(["Time in a city", "The local time of a city"]),
    param: "city",
    values: openValues(d, CITIES, true),
    enumerated: d.chance(0.6),
    ask: (d, city) => d.pick([`What time is it in ${city}?`, `Time in ${city}?`, `What is the time in ${city}?`]),
    result: (d) => {
      const t = TIME(d)
      return { value: t, sentence: (city) => d.pick([`It is ${t} in ${city}.`, `The time in ${city} is ${t}.`]) }
    },
    key: d.pick(["time", "answer"])
  },
  {
    name: d.pick(["price", "get_price", "lookup_price"]),
    description: d.pick(["Price of an item", "The price of an item in the shop", "Look up a price"]),
    param: "item",
    values: openValues(d, SHOP_ITEMS, false),
    enumerated: d.chance(0.7),
    ask: (d, item) =>
      d.pick([`How much is the ${item}?`, `What is the price of ${item}?`, `What does the ${item} cost?`]),
    result: (d) => {
      const p = d.number()
      return { value: p, sentence: (item) => d.pick([`The ${item} costs ${p}.`, `The price of ${item} is ${p}.`]) }
    },
    key: d.pick(["price", "answer", "value"])
  },
  {
    name: d.pick(["stock", "get_stock", "inventory"]),
    description: d.pick(["Units of an item in stock", "How many of an item the shop has"]),
    param: "item",
    values: openValues(d, SHOP_ITEMS, false),
    enumerated: d.chance(0.7),
    ask: (d, item) => d.pick([`How many ${item} are in stock?`, `How many ${item} do you have?`, `Stock of ${item}?`]),
    result: (d) => {
      const n = d.range(0, 500)
      return { value: n, sentence: (item) => d.pick([`There are ${n} ${item} in stock.`, `We have ${n} ${item}.`]) }
    },
    key: d.pick(["stock", "count", "answer"])
  },
  {
    name: d.pick(["lookup", "find", "search"]),
    description: d.pick(["Look up a code word", "Find the code of a name", "The code word of a person"]),
    param: "name",
    values: openValues(d, NAMES, true),
    enumerated: d.chance(0.5),
    ask: (d, name) => d.pick([`What is the code of ${name}?`, `Look up the code word of ${name}.`, `${name}'s code?`]),
    result: (d) => {
      const c = d.open(CODES)
      return { value: c, sentence: (name) => d.pick([`The code of ${name} is ${c}.`, `${name}'s code is ${c}.`]) }
    },
    key: d.pick(["code", "answer"])
  },
  {
    name: d.pick(["color_of", "get_color", "paint"]),
    description: d.pick(["The color of a thing", "Color of an item"]),
    param: "item",
    values: openValues(d, THINGS, false),
    enumerated: d.chance(0.6),
    ask: (d, item) => d.pick([`What color is the ${item}?`, `Which color is the ${item}?`]),
    result: (d) => {
      const c = d.open(COLORS)
      return { value: c, sentence: (item) => d.pick([`The ${item} is ${c}.`, `It is ${c}.`]) }
    },
    key: d.pick(["color", "answer"])
  },
  {
    name: d.pick(["age", "get_age", "age_of"]),
    description: d.pick(["Age of a person", "How old a person is"]),
    param: "name",
    values: openValues(d, NAMES, true),
    enumerated: d.chance(0.5),
    ask: (d, name) => d.pick([`How old is ${name}?`, `What is the age of ${name}?`]),
    result: (d) => {
      const a = d.range(1, 99)
      return { value: a, sentence: (name) => d.pick([`${name} is ${a} years old.`, `${name} is ${a}.`]) }
    },
    key: d.pick(["age", "answer", "years"])
  }
]

/** A tool's definition as `Tools.make` derives it from a `Schema.Struct` of one field. */
const definitionOf = (spec: ToolSpec): Tool => ({
  type: "function",
  function: {
    name: spec.name,
    description: spec.description,
    parameters: {
      type: "object",
      required: [spec.param],
      properties: {
        [spec.param]: spec.enumerated ? { type: "string", enum: [...spec.values] } : { type: "string" }
      },
      additionalProperties: false
    }
  }
})

/** How a tool's result is written in its `tool` turn. */
const resultText = (d: Draw, spec: ToolSpec, arg: string, value: string | number): string => {
  const r = d.rng.float()
  if (r < 0.6) return String(value)
  if (r < 0.85) return JSON.stringify({ [spec.key]: value })
  return JSON.stringify({ [spec.param]: arg, [spec.key]: value })
}

/** How the answer after a result states it. */
const answerText = (d: Draw, spec: ToolSpec, value: string | number, sentence: string): string => {
  const r = d.rng.float()
  if (r < 0.4) return String(value)
  if (r < 0.55) return sentence
  if (r < 0.85) return JSON.stringify({ answer: value })
  return JSON.stringify({ [d.pick([spec.key, "answer", "result", "value"])]: value })
}

const callMessage = (name: string, args: string, id: string): Message =>
  ({
    role: "assistant",
    content: null,
    tool_calls: [{ id, type: "function", function: { name, arguments: args } }]
  }) as Message

const toolMessage = (content: string, id: string): Message => ({ role: "tool", tool_call_id: id, content }) as Message

/**
 * A tool conversation: question, the right call, its result, an answer using it; one to four rounds of it
 * under one tools block, each result new, so an answer copies the latest result and no other.
 */
const toolUse = (d: Draw): Conversation => {
  const families = toolFamilies(d)
  const offered = d.some(families, d.pick([1, 1, 2, 2, 2, 3]))
  const messages: Array<Message> = maybeSystem(d)
  const copied: Array<string> = []
  const rounds = d.pick([1, 1, 1, 1, 2, 2, 2, 3, 3, 4])
  for (let round = 0; round < rounds; round++) {
    const spec = d.pick(offered)
    const arg = d.pick(spec.values)
    messages.push(user(spec.ask(d, arg)))
    const { value, sentence } = spec.result(d)
    messages.push(callMessage(spec.name, JSON.stringify({ [spec.param]: arg }), `call_${round}`))
    messages.push(toolMessage(resultText(d, spec, arg, value), `call_${round}`))
    messages.push(assistant(answerText(d, spec, value, sentence(arg))))
    copied.push(arg, String(value))
  }
  return { messages, tools: offered.map(definitionOf), copied }
}

// -----------------------------------------------------------------------------------------------------------
// Chat
// -----------------------------------------------------------------------------------------------------------

/** A value of any kind: a made-up word (most often), a word of a list, a number, a time. */
const anyValue = (d: Draw): string => {
  const r = d.rng.float()
  if (r < 0.45) return d.word()
  if (r < 0.7) return d.pick<string>([...CODES, ...COLORS, ...FRUITS, ...CITIES, ...ANIMALS])
  if (r < 0.9) return String(d.number())
  return TIME(d)
}

/**
 * A value stated in the prompt, asked back: a name, a code, words to repeat, a fact in the system turn, a
 * number, one entry of several. The values are mostly made up, so the answer has to copy them.
 */
const copying = (d: Draw): Conversation => {
  const r = d.int(6)
  if (r === 0) {
    const name = d.openName(NAMES)
    return {
      messages: [
        user(d.pick([`My name is ${name}. What is my name?`, `I am ${name}. Who am I?`])),
        assistant(d.pick([name, `Your name is ${name}.`, `You are ${name}.`, JSON.stringify({ name })]))
      ],
      copied: [name]
    }
  }
  if (r === 1) {
    const value = anyValue(d)
    return {
      messages: [
        user(d.pick([`The code is ${value}. What is the code?`, `Remember ${value}. What did I ask you to remember?`])),
        assistant(d.pick([value, value, `The code is ${value}.`, JSON.stringify({ answer: value })]))
      ],
      copied: [value]
    }
  }
  if (r === 2) {
    const words = Array.from({ length: d.range(1, 8) }, () =>
      d.chance(0.6) ? d.word() : d.pick<string>([...ADJECTIVES, ...ANIMALS, ...COLORS])
    )
    const text = words.join(" ")
    return {
      messages: [user(d.pick([`Repeat after me: ${text}`, `Say "${text}".`, `Echo: ${text}`])), assistant(text)],
      copied: [text]
    }
  }
  if (r === 3) {
    // A fact in the system or first turn, asked later.
    const name = d.openName(NAMES)
    const city = d.openName(CITIES)
    return {
      messages: [
        { role: "system", content: `${name} lives in ${city}.` } as Message,
        user(d.pick([`Where does ${name} live?`, `Which city is ${name} in?`])),
        assistant(d.pick([city, `${name} lives in ${city}.`, JSON.stringify({ city })]))
      ],
      copied: [name, city]
    }
  }
  if (r === 4) {
    // One entry of several: the value whose key the question names.
    const keys = d.some(
      ["code", "color", "word", "name", "city", "price", "count", "score", "time", "key"],
      d.range(2, 5)
    )
    const values = keys.map(() => anyValue(d))
    const k = d.int(keys.length)
    const facts = d.chance(0.5)
      ? keys.map((key, i) => `The ${key} is ${values[i]}.`).join(" ")
      : JSON.stringify(Object.fromEntries(keys.map((key, i) => [key, values[i]])))
    return {
      messages: [
        user(`${facts} What is the ${keys[k]}?`),
        assistant(d.pick([values[k]!, JSON.stringify({ answer: values[k] }), `The ${keys[k]} is ${values[k]}.`]))
      ],
      copied: [values[k]!]
    }
  }
  const key = d.pick(["price", "total", "count", "score"])
  const n = d.number()
  return {
    messages: [
      user(`The ${key} is ${n}. What is the ${key}?`),
      assistant(d.pick([String(n), `The ${key} is ${n}.`, JSON.stringify({ [key]: n }), JSON.stringify({ answer: n })]))
    ],
    copied: [String(n)]
  }
}

/** A JSON object with word and number values, often read from the prompt. */
const json = (d: Draw): Conversation => {
  const r = d.int(4)
  if (r === 0) {
    const name = d.pick(NAMES)
    const age = d.range(1, 99)
    const city = d.pick(CITIES)
    return {
      messages: [
        user(`${name} is ${age} and lives in ${city}. Reply with JSON.`),
        assistant(JSON.stringify(d.chance(0.5) ? { name, age, city } : { name, age }))
      ]
    }
  }
  if (r === 1) {
    const item = d.pick(SHOP_ITEMS)
    const price = d.number()
    return {
      messages: [
        user(d.pick([`The ${item} costs ${price}. Give it as JSON.`, `JSON for a ${item} at ${price}, please.`])),
        assistant(JSON.stringify({ item, price }))
      ]
    }
  }
  if (r === 2) {
    const object: Record<string, string | number> = {}
    for (const [kind, words] of d.some(KINDS, d.range(1, 3))) object[kind] = d.pick(words)
    if (d.chance(0.5)) object.count = d.range(0, 20)
    return {
      messages: [
        user(d.pick(["Describe something as JSON.", "Give me a JSON object."])),
        assistant(JSON.stringify(object))
      ]
    }
  }
  const thing = d.pick(THINGS)
  const color = d.pick(COLORS)
  const size = d.pick(["small", "big"])
  return {
    messages: [
      user(`A ${size} ${color} ${thing}. As JSON?`),
      assistant(JSON.stringify(d.chance(0.5) ? { thing, color, size } : { name: thing, color }))
    ]
  }
}

/** A yes/no question the prompt answers. */
const yesNo = (d: Draw): Conversation => {
  const r = d.int(4)
  let question: string
  let yes: boolean
  if (r === 0) {
    const [kind, words] = d.pick(KINDS)
    const word = d.chance(0.5) ? d.pick(words) : d.pick(d.pick(KINDS)[1])
    yes = words.includes(word)
    question = `Is ${word} a ${kind}?`
  } else if (r === 1) {
    const a = d.range(0, 99)
    const b = d.range(0, 99)
    yes = a > b
    question = d.pick([`Is ${a} greater than ${b}?`, `Is ${a} more than ${b}?`])
  } else if (r === 2) {
    const list = d.some(THINGS, 3)
    const word = d.chance(0.5) ? d.pick(list) : d.pick(THINGS)
    yes = list.includes(word)
    question = `I have a ${list.join(", a ")}. Do I have a ${word}?`
  } else {
    const w = d.pick(WEATHERS)
    const asked = d.chance(0.5) ? w : d.pick(WEATHERS)
    yes = asked === w
    question = `It is ${w} today. Is it ${asked}?`
  }
  const word = yes ? "yes" : "no"
  const suffix = d.pick(["", " Answer yes or no.", " (yes/no)"])
  return {
    messages: [
      user(`${question}${suffix}`),
      assistant(d.pick([word, cap(word), `${cap(word)}.`, JSON.stringify({ answer: word })]))
    ]
  }
}

/** The one of a few options that answers the question. */
const choice = (d: Draw): Conversation => {
  const r = d.int(3)
  if (r === 0) {
    const [a, b] = [d.range(0, 999), d.range(0, 999)]
    const big = d.chance(0.5)
    return {
      messages: [
        user(`Which is ${big ? "larger" : "smaller"}, ${a} or ${b}?`),
        assistant(String(big ? Math.max(a, b) : Math.min(a, b)))
      ]
    }
  }
  if (r === 1) {
    const [kind, words] = d.pick(KINDS)
    const right = d.pick(words)
    const others = d.some(
      KINDS.filter(([k]) => k !== kind).flatMap(([, w]) => w),
      d.range(1, 3)
    )
    const options = d.some([right, ...others], others.length + 1)
    return {
      messages: [user(`Which of these is a ${kind}: ${options.join(", ")}?`), assistant(d.pick([right, cap(right)]))]
    }
  }
  const options = d.some(COLORS, d.range(2, 4))
  const picked = d.pick(options)
  return {
    messages: [
      user(`Pick one of ${options.join(", ")}.`),
      assistant(d.pick([picked, `I pick ${picked}.`, JSON.stringify({ choice: picked })]))
    ]
  }
}

/** A short sentence of the small grammar. */
const sentence = (d: Draw): string => {
  const subject = `The ${d.pick(ADJECTIVES)} ${d.pick(ANIMALS)}`
  return `${subject} ${d.pick(VERBS)} in the ${d.pick(PLACES)}.`
}

/** Greetings, short sentences, lists. */
const smallTalk = (d: Draw): Conversation => {
  const r = d.int(4)
  if (r === 0) {
    return {
      messages: [
        user(d.pick(["Hello!", "Hi.", "Hey there", "Good morning!"])),
        assistant(d.pick(["Hello! How can I help you today?", "Hi! What can I do for you?", "Hello. How can I help?"]))
      ]
    }
  }
  if (r === 1) {
    const n = d.range(1, 3)
    return {
      messages: [
        user(d.pick(["Tell me a short story.", "Write a sentence.", "Say something."])),
        assistant(Array.from({ length: n }, () => sentence(d)).join(" "))
      ]
    }
  }
  if (r === 2) {
    const [kind, words] = d.pick(KINDS)
    const n = d.range(2, 4)
    return {
      messages: [user(`Name ${n} ${kind === "city" ? "cities" : `${kind}s`}.`), assistant(d.some(words, n).join(", "))]
    }
  }
  return {
    messages: [
      user(d.pick(["Thank you!", "Thanks.", "Bye!"])),
      assistant(d.pick(["You are welcome!", "Glad to help.", "Goodbye!"]))
    ]
  }
}

const MIX: ReadonlyArray<readonly [number, (d: Draw) => Conversation]> = [
  [0.35, toolUse],
  [0.33, copying],
  [0.1, json],
  [0.08, yesNo],
  [0.07, choice],
  [0.07, smallTalk]
]

/**
 * A copying drill: a value of the prompt asked back, or tool rounds without the tools block (their calls and
 * results are all there is), so that nearly every answer is a copy and the conversations are short.
 */
const drill = (d: Draw): Conversation => {
  if (d.chance(0.6)) return copying(d)
  const { tools: _, ...rest } = toolUse(d)
  return rest
}

/** The next conversation of a corpus. */
const conversation = (d: Draw): Conversation => {
  let r = d.rng.float()
  for (const [weight, make] of MIX) {
    if (r < weight) return make(d)
    r -= weight
  }
  return smallTalk(d)
}

/**
 * Render a conversation with the engine's chat template (no generation prompt), marking the tokens of its
 * assistant turns (the body after `<|im_start|>assistant\n` and the `<|im_end|>` that closes it) with 1, and
 * those of its turns' copies of the conversation's `copied` values with 2.
 */
export const render = (c: Conversation): RenderedConversation => {
  const { ids } = renderPrompt(c.messages, { tools: c.tools, addGenerationPrompt: false })
  const assistant = new Uint8Array(ids.length)
  const header = [..."assistant\n"].map((ch) => ch.charCodeAt(0))
  let inside = false
  for (let i = 0; i < ids.length; i++) {
    if (inside) {
      assistant[i] = 1
      if (ids[i] === IM_END) inside = false
    } else if (ids[i] === IM_START && header.every((b, k) => ids[i + 1 + k] === b)) {
      i += header.length
      inside = true
    }
  }
  for (const value of c.copied ?? []) {
    const bytes = encode(value)
    if (bytes.length === 0) continue
    for (let i = 0; i + bytes.length <= ids.length; i++) {
      if (assistant[i] !== 0 && bytes.every((b, k) => ids[i + k] === b && assistant[i + k] !== 0)) {
        assistant.fill(2, i, i + bytes.length)
      }
    }
  }
  return { ids, assistant }
}

/** A corpus: an endless, seeded stream of conversations. */
export class Corpus {
  private readonly draw: Draw
  constructor(seed: number) {
    this.draw = new Draw(new Rng(seed))
  }
  /** Whether the next conversations are copying drills (`drill`) rather than the mix. */
  drilling = false
  /** The next conversation. */
  next(): Conversation {
    return this.drilling ? drill(this.draw) : conversation(this.draw)
  }
  /** The next conversation, rendered. */
  nextRendered(): RenderedConversation {
    return render(this.next())
  }
}
