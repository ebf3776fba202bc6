// Command pulumi-resource-drovertest is the Pulumi provider drover's tests use:
// its resources act on this machine only, so a stack needs no cloud.
//
//	drovertest:index:File   writes inputs.content to inputs.path (mode 0644).
//	                        Read reports the file as it is, so
//	                        `pulumi preview --refresh` sees a file changed or
//	                        removed by hand (drift). failWith, when set, makes
//	                        create and update fail with that message (a failed
//	                        version).
//
// It is built by hack/pulumi-tools.sh and is not part of drover.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

func main() {
	prov, err := infer.NewProviderBuilder().
		WithResources(infer.Resource(File{})).
		WithNamespace("drover").
		Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := p.RunProvider(context.Background(), "drovertest", "0.1.0", prov); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// File is a file on this machine.
type File struct{}

// FileArgs are a File's inputs.
type FileArgs struct {
	Path     string `pulumi:"path"`
	Content  string `pulumi:"content"`
	FailWith string `pulumi:"failWith,optional"`
}

// FileState is a File's state.
type FileState struct {
	FileArgs
}

func write(in FileArgs) error {
	if in.FailWith != "" {
		return errors.New(in.FailWith)
	}
	if !filepath.IsAbs(in.Path) {
		return fmt.Errorf("path %q is not absolute", in.Path)
	}
	if err := os.MkdirAll(filepath.Dir(in.Path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(in.Path, []byte(in.Content), 0o644)
}

// Create writes the file.
func (File) Create(_ context.Context, req infer.CreateRequest[FileArgs]) (infer.CreateResponse[FileState], error) {
	if !req.DryRun {
		if err := write(req.Inputs); err != nil {
			return infer.CreateResponse[FileState]{}, err
		}
	}
	return infer.CreateResponse[FileState]{ID: req.Inputs.Path, Output: FileState{req.Inputs}}, nil
}

// Read reports the file as it is on disk: gone, or its content.
func (File) Read(_ context.Context, req infer.ReadRequest[FileArgs, FileState]) (infer.ReadResponse[FileArgs, FileState], error) {
	data, err := os.ReadFile(req.ID)
	if errors.Is(err, fs.ErrNotExist) {
		return infer.ReadResponse[FileArgs, FileState]{}, nil
	}
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, err
	}
	in := req.State.FileArgs
	in.Path, in.Content = req.ID, string(data)
	return infer.ReadResponse[FileArgs, FileState]{ID: req.ID, Inputs: in, State: FileState{in}}, nil
}

// Update rewrites the file.
func (File) Update(_ context.Context, req infer.UpdateRequest[FileArgs, FileState]) (infer.UpdateResponse[FileState], error) {
	if !req.DryRun {
		if req.State.Path != req.Inputs.Path {
			_ = os.Remove(req.State.Path)
		}
		if err := write(req.Inputs); err != nil {
			return infer.UpdateResponse[FileState]{}, err
		}
	}
	return infer.UpdateResponse[FileState]{Output: FileState{req.Inputs}}, nil
}

// Delete removes the file.
func (File) Delete(_ context.Context, req infer.DeleteRequest[FileState]) (infer.DeleteResponse, error) {
	if err := os.Remove(req.State.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return infer.DeleteResponse{}, err
	}
	return infer.DeleteResponse{}, nil
}
