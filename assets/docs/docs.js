// Swagger UI over the service's own description; no inline script, so the page's CSP can
// forbid them.
window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#ui',
  deepLinking: true,
  tryItOutEnabled: true,
});
