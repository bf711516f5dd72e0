/**
 * The dashboard of the embedded backend: a hash router over the login form and the pages (projects, a model,
 * a step). The key lives in `sessionStorage` only; a 401 from any read forgets it and shows the form again.
 */
import "uplot/dist/uPlot.min.css"
import "./style.css"
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { forgetKey, storedKey } from "./api.js"
import { html } from "./html.js"
import { Login } from "./login.js"
import { Model } from "./model.js"
import { Models } from "./models.js"
import { Step } from "./step.js"

const useHash = () => {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const changed = () => setHash(location.hash)
    addEventListener("hashchange", changed)
    return () => removeEventListener("hashchange", changed)
  }, [])
  return hash
}

const Page = ({ hash }: { readonly hash: string }) => {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?")
  const parts = path
    .split("/")
    .filter((part) => part !== "")
    .map(decodeURIComponent)
  if (parts[0] === "models" && parts[1] !== undefined) return html`<${Model} id=${parts[1]} />`
  if (parts[0] === "logs" && parts[1] !== undefined) {
    return html`<${Step} key=${hash} logId=${parts[1]} query=${new URLSearchParams(search)} />`
  }
  return html`<${Models} />`
}

const App = () => {
  const [authed, setAuthed] = useState(storedKey() !== null)
  const hash = useHash()
  useEffect(() => {
    const refused = () => {
      forgetKey()
      setAuthed(false)
    }
    addEventListener("effect-rl-unauthorized", refused)
    return () => removeEventListener("effect-rl-unauthorized", refused)
  }, [])
  if (!authed) return html`<${Login} onLogin=${() => setAuthed(true)} />`
  return html`<div class="app">
    <header class="top">
      <a class="brand" href="#/">effect-rl</a>
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
