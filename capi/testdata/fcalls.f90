! fcalls: the module's restart calls in the forms FTI's Fortran codes use.
! The write run names its variables (FTI_setIDFromString) and takes an
! incremental checkpoint (FTI_InitICP with a logical, FTI_AddVarICP,
! FTI_FinalizeICP). The read run finds the ids again by name
! (FTI_getIDFromString) and recovers them one by one between
! FTI_RecoverVarInit and FTI_RecoverVarFinalize, called without an
! argument, then once more with err.
!   fcalls CONFIG write|read
program fcalls
  use, intrinsic :: iso_fortran_env, only: output_unit
  use mpi
  use fti
  implicit none
  character(len=4096) :: config, mode
  character(len=*), parameter :: names(3) = [character(len=16) :: 'pressure', 'velocity', 'step']
  integer :: err, comm, status, failures, i, ids(3), rank
  integer(kind=8) :: stored
  logical :: writing
  real(kind=8), pointer :: p(:,:), v(:)
  integer(kind=4), pointer :: step

  failures = 0
  call get_command_argument(1, config)
  call get_command_argument(2, mode)
  writing = trim(mode) == 'write'
  call MPI_Init(err)
  comm = MPI_COMM_WORLD
  call FTI_Init(config, comm, err)
  call check(err == FTI_SCES, 'FTI_Init')
  call MPI_Comm_rank(comm, rank, err)
  allocate (p(4, 3), v(5), step)
  p = 0
  v = 0
  step = 0
  if (writing) then
    do i = 1, 3
      call FTI_setIDFromString(trim(names(i)), ids(i))
    end do
    call check(ids(1) /= ids(2) .and. ids(2) /= ids(3) .and. ids(1) /= ids(3), 'distinct ids')
    p = reshape([(real(i, 8) + 0.5d0 * rank, i = 1, 12)], [4, 3])
    v = [(-real(i, 8), i = 1, 5)]
    step = 41 + rank
    call FTI_Protect(ids(1), p, err)
    call FTI_Protect(ids(2), v, err)
    call FTI_Protect(ids(3), step, err)
    call check(err == FTI_SCES, 'FTI_Protect')
    call FTI_InitICP(7, 1, .true., err)
    call check(err == FTI_SCES, 'FTI_InitICP')
    do i = 3, 1, -1
      call FTI_AddVarICP(ids(i), err)
      call check(err == FTI_SCES, 'FTI_AddVarICP '//trim(names(i)))
    end do
    call FTI_FinalizeICP(err)
    call check(err == FTI_SCES, 'FTI_FinalizeICP')
    ! An inactive iCP region takes no checkpoint.
    call FTI_InitICP(8, 1, .false., err)
    call check(err == FTI_SCES, 'FTI_InitICP inactive')
  else
    call FTI_Status(status)
    call check(status == 1, 'FTI_Status is 1')
    call FTI_RecoverVarInit()
    do i = 3, 1, -1
      call FTI_getIDFromString(trim(names(i)), ids(i))
    end do
    call FTI_Protect(ids(1), p, err)
    call FTI_Protect(ids(2), v, err)
    call FTI_Protect(ids(3), step, err)
    call FTI_GetStoredSize(ids(1), stored)
    call check(stored == 96, 'FTI_GetStoredSize of pressure is 96')
    do i = 2, 3
      call FTI_RecoverVar(ids(i), err)
      call check(err == FTI_SCES, 'FTI_RecoverVar '//trim(names(i)))
    end do
    call FTI_RecoverVarFinalize()
    call check(all(p == 0), 'pressure untouched before its FTI_RecoverVar')
    call check(step == 41 + rank, 'step recovered')
    call check(all(v == [(-real(i, 8), i = 1, 5)]), 'velocity recovered')
    call FTI_RecoverVarInit(err)
    call check(err == FTI_SCES, 'FTI_RecoverVarInit(err)')
    call FTI_RecoverVar(ids(1), err)
    call check(err == FTI_SCES, 'FTI_RecoverVar pressure')
    call FTI_RecoverVarFinalize(err)
    call check(err == FTI_SCES, 'FTI_RecoverVarFinalize(err)')
    call check(all(p == reshape([(real(i, 8) + 0.5d0 * rank, i = 1, 12)], [4, 3])), 'pressure recovered')
  end if
  call finish(writing)

contains

  include 'fcheck.inc'

end program fcalls
