/**
 * The dashboard of the embedded backend: a hash router over the login form and the pages (projects, a model,
 * a step, the traces). The key lives in `sessionStorage` only; a 401 from any read forgets it and shows the
 * form again. Opened from a one-time sign-in link (`#token=...`), the page takes the token out of the address
 * bar first, then trades it for the key at `/v1/local/sign-in`.
 */
import "uplot/dist/uPlot.min.css"
import "./style.css"
import "./traces.css"
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { forgetKey, signIn, storedKey, storeKey } from "./api.js"
import { html } from "./html.js"
import { Login } from "./login.js"
import { Model } from "./model.js"
import { Models } from "./models.js"
import { Step } from "./step.js"
import { Trace } from "./trace.js"
import { TraceList, TraceProjects } from "./traces.js"

/** The token of a one-time sign-in link (`#token=...`), taken out of the address bar at once. */
const takeToken = (): string | null => {
  const match = /^#token=([\w-]+)$/.exec(location.hash)
  if (match === null) return null
  history.replaceState(null, "", `${location.pathname}${location.search}`)
  return match[1] ?? null
}

/** The hash route, and the token of a sign-in link opened (on load, or pasted into the open tab). */
const useHash = () => {
  const [token, setToken] = useState<string | null>(takeToken)
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const changed = () => {
      const next = takeToken()
      if (next !== null) setToken(next)
      setHash(location.hash)
    }
    addEventListener("hashchange", changed)
    return () => removeEventListener("hashchange", changed)
  }, [])
  return { hash, token, tokenDone: () => setToken(null) }
}

const Page = ({ hash }: { readonly hash: string }) => {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?")
  const parts = path
    .split("/")
    .filter((part) => part !== "")
    .map(decodeURIComponent)
  if (parts[0] === "models" && parts[1] !== undefined) return html`<${Model} id=${parts[1]} />`
  if (parts[0] === "traces" && parts[1] !== undefined) return html`<${TraceList} key=${parts[1]} project=${parts[1]} />`
  if (parts[0] === "traces") return html`<${TraceProjects} />`
  if (parts[0] === "trace" && parts[1] !== undefined && parts[2] !== undefined) {
    return html`<${Trace} key=${hash} project=${parts[1]} callId=${parts[2]} />`
  }
  if (parts[0] === "logs" && parts[1] !== undefined) {
    return html`<${Step} key=${hash} logId=${parts[1]} query=${new URLSearchParams(search)} />`
  }
  return html`<${Models} />`
}

const App = () => {
  const { hash, token, tokenDone } = useHash()
  const [authed, setAuthed] = useState(storedKey() !== null && token === null)
  const [linkError, setLinkError] = useState<string | null>(null)
  useEffect(() => {
    if (token === null) return
    setLinkError(null)
    signIn(token)
      .then((key) => {
        storeKey(key)
        setAuthed(true)
      })
      .catch((e: Error) => {
        // Already signed in (this tab keeps a key): a spent link changes nothing.
        if (storedKey() !== null) return setAuthed(true)
        setAuthed(false)
        setLinkError(e.message)
      })
      .finally(tokenDone)
  }, [token])
  useEffect(() => {
    const refused = () => {
      forgetKey()
      setAuthed(false)
    }
    addEventListener("effect-rl-unauthorized", refused)
    return () => removeEventListener("effect-rl-unauthorized", refused)
  }, [])
  if (token !== null) return html`<main class="login"><p class="muted">Signing in…</p></main>`
  if (!authed) return html`<${Login} notice=${linkError} onLogin=${() => setAuthed(true)} />`
  return html`<div class="app">
    <header class="top">
      <a class="brand" href="#/">effect-rl</a>
      <nav class="sections"><a href="#/">Models</a><a href="#/traces">Traces</a></nav>
      <span class="muted">dashboard of the embedded backend</span>
      <button class="link" onClick=${() => {
        forgetKey()
        setAuthed(false)
      }}>Sign out</button>
    </header>
    <main><${Page} hash=${hash} /></main>
  </div>`
}

const root = document.getElementById("app")
if (root !== null) render(html`<${App} />`, root)
