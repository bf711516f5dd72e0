/**
 * Annotations the wire schemas carry for the embedded backend's error reporting.
 *
 * @internal
 */

/**
 * Marks a filter whose issues are ordinary field issues (the filter validates parts of its value against
 * other schemas and returns their issues), to be reported as such rather than as one check across fields.
 */
export const FieldIssuesAnnotationId: unique symbol = Symbol.for("effect-rl/annotations/FieldIssues")
