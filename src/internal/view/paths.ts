/**
 * The cluster page's paths (`ClusterView.paths`), apart from the page's module so that the routes can
 * be listed without loading it (`HttpRoutes` loads the page on its first request).
 *
 * @internal
 */
export const paths = {
  page: "/cluster/",
  script: "/cluster/cluster.js",
  style: "/cluster/cluster.css",
  view: "/cluster/view.json",
  events: "/cluster/events"
} as const
