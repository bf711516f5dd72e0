/** `html`: htm bound to Preact's `h`, the page's way of writing markup; and small formatting helpers. */
import htm from "htm"
import { h } from "preact"

export const html = htm.bind(h)

/** A number for reading: 3 significant digits, or a dash for none. */
export const num = (value: number | null | undefined): string => {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—"
  if (value !== 0 && Math.abs(value) < 0.001) return value.toExponential(2)
  return Number.parseFloat(value.toPrecision(3)).toString()
}

/** An ISO time as the reader's local time. */
export const time = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : "—")

/** A short form of a long id. */
export const short = (id: string): string => (id.length > 12 ? `${id.slice(0, 8)}…` : id)
