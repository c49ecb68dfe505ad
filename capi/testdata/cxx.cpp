// cxx: a C++ program using FTI's C API through ftigo's fti.h.
//
//   cxx CONFIG
//
// Protects a std::vector and a struct array, checkpoints, reads the
// session's configuration and finalizes; exits non-zero on any unexpected
// return code.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fti.h"

namespace {

struct Cell {
    double value;
    int owner;
};

int failures = 0;

void expect(const char *what, long long got, long long want) {
    bool ok = got == want;
    failures += ok ? 0 : 1;
    std::printf("CHECK %s got=%lld want=%lld %s\n", what, got, want, ok ? "ok" : "FAIL");
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: cxx CONFIG\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    expect("FTI_Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    int rank = 0, size = 0;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);

    std::vector<double> field(1000, rank + 0.5);
    std::vector<Cell> cells(10, Cell{1.5, rank});
    fti_id_t cellType = FTI_InitCompositeType("Cell", sizeof(Cell), nullptr);
    expect("FTI_AddScalarField value", FTI_AddScalarField(cellType, "value", FTI_DBLE, offsetof(Cell, value)), FTI_SCES);
    expect("FTI_AddScalarField owner", FTI_AddScalarField(cellType, "owner", FTI_INTG, offsetof(Cell, owner)), FTI_SCES);
    expect("FTI_Protect field", FTI_Protect(0, field.data(), static_cast<int64_t>(field.size()), FTI_DBLE), FTI_SCES);
    expect("FTI_Protect cells", FTI_Protect(1, cells.data(), static_cast<int64_t>(cells.size()), cellType), FTI_SCES);
    expect("FTI_Status", FTI_Status(), 0);
    expect("FTI_Checkpoint", FTI_Checkpoint(1, FTI_L1), FTI_DONE);
    expect("FTI_GetStoredSize", FTI_GetStoredSize(1), static_cast<long long>(10 * sizeof(Cell)));

    FTIT_allConfiguration conf = FTI_GetConfig(argv[1], MPI_COMM_WORLD);
    expect("nbProc", conf.topology.nbProc, size);
    expect("localDir set", std::strlen(conf.configuration.localDir) > 0, 1);
    FTI_Print("hello from C++", FTI_INFO);

    expect("FTI_Finalize", FTI_Finalize(), FTI_SCES);
    MPI_Finalize();
    std::printf("FAILURES %d\n", failures);
    return failures;
}
