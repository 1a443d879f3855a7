// QR rendering of the pairing link. No encoder is bundled yet (no CDN, no
// build step): the dashboard shows the link as text instead.
export function renderQr(container, text) {
  container.hidden = true;
  container.textContent = "";
  container.dataset.url = text;
}
