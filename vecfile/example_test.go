package vecfile_test

import (
	"errors"
	"fmt"

	"github.com/vlc-embed/vlc/vecfile"
)

// Map a raw float16 file (it does not record its dimension) and read rows
// as float32; the file's bytes are not copied.
func ExampleOpen() {
	m, err := vecfile.Open("../testdata/deep2k/base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	_, float16 := m.Float16()
	fmt.Printf("%d x %d, float16 %v\n", m.Len(), m.Dim(), float16)
	row := m.Row(0, nil)
	fmt.Printf("row 0 starts %.4f %.4f %.4f\n", row[0], row[1], row[2])
	if err := m.CheckFinite(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 2000 x 96, float16 true
	// row 0 starts 0.2153 -0.0612 0.0877
}

// A file whose size is not a whole number of rows is refused, naming the
// file and the sizes.
func ExampleOpen_badSize() {
	_, err := vecfile.Open("../testdata/deep2k/base.f16", vecfile.Options{Dim: 97})
	fmt.Println(err)
	fmt.Println(errors.Is(err, vecfile.ErrSize))
	// Output:
	// ../testdata/deep2k/base.f16: file size 384000 bytes is not a multiple of the row size 194 bytes (dim 97 x float16): 74 bytes left over
	// true
}

// Read the exact nearest neighbours of each query from an .ivecs file.
func ExampleReadIvecs() {
	gt, err := vecfile.ReadIvecs("../testdata/deep2k/groundtruth.ivecs")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(gt), "queries; the first one's three nearest:", gt[0][:3])
	// Output:
	// 200 queries; the first one's three nearest: [1636 62 80]
}
