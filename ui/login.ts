/** The login form: the server's key, checked against a read and kept in the browser session only. */
import { useState } from "preact/hooks"
import { check, storeKey } from "./api.js"
import { html } from "./html.js"

export const Login = ({ onLogin, notice }: { readonly onLogin: () => void; readonly notice?: string | null }) => {
  const [key, setKey] = useState("")
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(null)
    const ok = await check(key.trim()).catch(() => false)
    setBusy(false)
    if (!ok) return setError("The server refused this key.")
    storeKey(key.trim())
    setKey("")
    onLogin()
  }
  return html`<main class="login">
    <form onSubmit=${submit} class="card">
      <h1>effect-rl dashboard</h1>
      ${
        notice === null || notice === undefined
          ? null
          : html`<p class="error" role="alert">The sign-in link did not work: ${notice}. Sign in with the key below, or
              ask the server for a new link.</p>`
      }
      <p>Enter the API key of this server: the one <code>effect-rl serve</code> printed or stored in its data
      directory (<code>api-key</code>). It is kept for this browser tab only.</p>
      <label for="key">API key</label>
      <input id="key" name="key" type="password" autocomplete="current-password" required autofocus
        value=${key} onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)} />
      <button class="primary" type="submit" disabled=${busy}>${busy ? "Checking…" : "Open"}</button>
      ${error === null ? null : html`<p class="error" role="alert">${error}</p>`}
    </form>
  </main>`
}
