/**
 * `structured_outputs.choice`: the output is exactly one of the given strings.
 *
 * @since 0.1.0
 */
import { alt, literal, type Node } from "./Automaton.js"

/** The automaton node of a choice list: one of the strings, verbatim (the list must not be empty). */
export const choiceNode = (choices: ReadonlyArray<string>): Node => alt(...choices.map(literal))
