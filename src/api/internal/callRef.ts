/**
 * The ref of a trace call, as feedback and trajectories name it: `weave:///<project>/call/<id>`. One
 * definition for the workflow (which writes it) and the embedded backend (which reads it).
 *
 * @internal
 */

/** The ref of the call `id` of `project`. */
export const callRef = (project: string, id: string): string => `weave:///${project}/call/${id}`
