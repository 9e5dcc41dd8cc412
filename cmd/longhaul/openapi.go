package main

import (
	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/openapi"
)

// openapiCmd prints the API's OpenAPI 3.1 document, the one a server serves
// at /v1/openapi.json, from this binary: no server is needed to generate a
// client.
func (c *cli) openapiCmd() *cobra.Command {
	var asYAML bool
	cmd := &cobra.Command{
		Use:   "openapi [--yaml]",
		Short: "Print the HTTP API's OpenAPI 3.1 document",
		Long: `Print the OpenAPI 3.1 document of the HTTP API that this binary serves (the
same as GET /v1/openapi.json): every route, with the shapes of its requests
and answers. Feed it to a client generator or an API explorer.`,
		Example: `  longhaul openapi > openapi.json
  longhaul openapi --yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			doc := openapi.JSON()
			if asYAML {
				doc = openapi.YAML()
			}
			_, err := c.stdout.Write(doc)
			return err
		},
	}
	cmd.Flags().BoolVar(&asYAML, "yaml", false, "print the document as YAML (as written) instead of JSON")
	return cmd
}
